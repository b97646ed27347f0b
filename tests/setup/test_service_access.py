"""Whether the agent's service can reach this installation: checked as the service's user when it exists."""

from __future__ import annotations

import os
import pwd
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigmon.setup.service_access import unreadable_by_service

SH = os.path.realpath("/bin/sh")


@pytest.fixture
def install() -> Iterator[tuple[Path, Path, Path]]:
    """A venv-like installation (its top, its script, a module of the package), readable by all."""
    with tempfile.TemporaryDirectory(dir=tempfile.gettempdir()) as tmp:
        venv = Path(tmp) / "venvs" / "rigmon"
        module = venv / "lib/python3.11/site-packages/rigmon/__init__.py"
        script = venv / "bin/rigmon"
        module.parent.mkdir(parents=True)
        script.parent.mkdir(parents=True)
        module.write_text("")
        script.write_text("#!/usr/bin/python3\n")
        os.chmod(tmp, 0o755)
        for path in [*module.parents, *script.parents]:
            if str(path).startswith(tmp):
                path.chmod(0o755)
        script.chmod(0o755)
        module.chmod(0o644)
        yield Path(tmp), script, module


def test_an_installation_others_cannot_read_is_refused_for_the_service(install: tuple[Path, Path, Path]) -> None:
    # pipx under a umask of 027 (hardened hosts) makes its venv 750 root:root: the service's user could
    # not enter it, the unit failed at every start (Restart=always), and set-up had said it was done.
    top, script, module = install
    assert unreadable_by_service((str(script),), SH, str(module)) is None
    module.chmod(0o640)
    assert unreadable_by_service((str(script),), SH, str(module)) == (str(module), 0o640)
    module.chmod(0o644)
    (top / "venvs").chmod(0o750)
    assert unreadable_by_service((str(script),), SH, str(module)) == (str(top / "venvs"), 0o750)


def _nobody() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("checking as another user needs root (CI runs as root)")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' on this machine")


def test_an_installation_the_service_user_reads_through_its_group_is_accepted(
        install: tuple[Path, Path, Path]) -> None:
    # A venv made 750 root:GROUP with the service's user in GROUP (or an ACL granting it) is readable by
    # the service; judged by the bits for others, setup refused it and told the operator to open it to all.
    nobody = _nobody()
    top, script, module = install
    venvs = top / "venvs"
    os.chown(venvs, 0, nobody.pw_gid)
    venvs.chmod(0o750)
    assert unreadable_by_service((str(script),), SH, str(module), user="nobody") is None
    # The same tree for a user set-up has yet to create (in none of its groups): refused.
    assert unreadable_by_service((str(script),), SH, str(module), user="rigmon-no-such-user") == (str(venvs), 0o750)
    # Not in the group: the check as the user refuses it too, naming the directory.
    os.chown(venvs, 0, 0)
    assert unreadable_by_service((str(script),), SH, str(module), user="nobody") == (str(venvs), 0o750)


def test_a_module_only_the_owner_reads_is_named_when_checked_as_the_user(install: tuple[Path, Path, Path]) -> None:
    nobody = _nobody()
    _top, script, module = install
    os.chown(module, 0, nobody.pw_gid)
    module.chmod(0o640)
    assert unreadable_by_service((str(script),), SH, str(module), user="nobody") is None
    module.chmod(0o600)
    assert unreadable_by_service((str(script),), SH, str(module), user="nobody") == (str(module), 0o600)
