"""The agent's certificate and key are checked before it serves: one line naming the setting, the file and
what is wrong, instead of OpenSSL's ``[SSL] PEM lib (_ssl.c:3905)``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from rigmon.agent.server import StartupError
from rigmon.agent.tls_files import check_tls_files
from tests.agent.tls_certs import TlsFiles, make_tls_files

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls_files(tmp_path)


def private(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def refusal(cert: Path, key: Path) -> str:
    with pytest.raises(StartupError) as refused:
        check_tls_files(str(cert), str(key), "--tls-cert", "--tls-key")
    return str(refused.value)


def test_a_good_pair_passes(tls: TlsFiles) -> None:
    check_tls_files(str(tls.cert_file), str(tls.key_file), "--tls-cert", "--tls-key")


def test_missing_files_are_named_by_their_option(tls: TlsFiles, tmp_path: Path) -> None:
    assert refusal(tmp_path / "none.pem", tls.key_file) == f"--tls-cert {tmp_path / 'none.pem'}: No such file or directory"
    assert refusal(tls.cert_file, tmp_path / "none.key") == f"--tls-key {tmp_path / 'none.key'}: No such file or directory"
    assert refusal(tmp_path, tls.key_file) == f"--tls-cert {tmp_path} is a directory; a PEM file must be a regular file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_certificate_says_so(tls: TlsFiles) -> None:
    tls.cert_file.chmod(0)
    assert refusal(tls.cert_file, tls.key_file).startswith(f"--tls-cert {tls.cert_file}: Permission denied (the agent runs as uid")


def test_a_file_that_is_not_pem_is_named(tls: TlsFiles, tmp_path: Path) -> None:
    junk = private(tmp_path / "junk.pem", b"not a certificate\n")
    assert refusal(junk, tls.key_file) == \
        f"--tls-cert {junk}: not a PEM certificate (no -----BEGIN CERTIFICATE----- block)"
    assert refusal(tls.cert_file, junk) == \
        f"--tls-key {junk}: not a PEM private key (no -----BEGIN ... PRIVATE KEY----- block)"
    damaged = private(tmp_path / "damaged.pem", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    assert refusal(damaged, tls.key_file) == \
        f"--tls-cert {damaged}: not a PEM certificate OpenSSL can read (a damaged CERTIFICATE block)"


def test_swapped_files_are_called_swapped(tls: TlsFiles, tmp_path: Path) -> None:
    cert_copy = private(tmp_path / "cert-copy.pem", tls.cert_file.read_bytes())
    assert "it holds a private key (are the certificate and key swapped?)" in refusal(tls.key_file, cert_copy)
    assert "it holds a certificate (are the certificate and key swapped?)" in refusal(tls.cert_file, cert_copy)


def test_a_key_of_another_certificate_does_not_match(tls: TlsFiles, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    other = make_tls_files(tmp_path / "other")
    assert refusal(tls.cert_file, other.key_file) == \
        f"--tls-key {other.key_file}: the key does not match the certificate --tls-cert {tls.cert_file}"


def test_a_key_under_a_passphrase_is_refused_without_a_prompt(tls: TlsFiles, tmp_path: Path) -> None:
    key = serialization.load_pem_private_key(tls.key_file.read_bytes(), None)
    locked = private(tmp_path / "locked.key", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")))
    assert refusal(tls.cert_file, locked).startswith(f"--tls-key {locked}: the key is encrypted with a passphrase")


def test_a_key_others_can_read_is_still_refused(tls: TlsFiles) -> None:
    tls.key_file.chmod(0o644)
    assert refusal(tls.cert_file, tls.key_file) == \
        f"--tls-key {tls.key_file} is readable or writable by other users; chmod 600 it"


def agent(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rigmon", "agent", "--root", str(tmp_path), "--state-dir", str(tmp_path / "s"),
         "--listen", "127.0.0.1:0", *args],
        capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **(env or {})})


def test_the_agent_names_the_option_the_file_and_the_fault_in_one_line(tls: TlsFiles, tmp_path: Path) -> None:
    junk = private(tmp_path / "junk.pem", b"garbage\n")
    out = agent(tmp_path, "--tls-cert", str(junk), "--tls-key", str(tls.key_file))
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == \
        f"rigmon: --tls-cert {junk}: not a PEM certificate (no -----BEGIN CERTIFICATE----- block)"
    assert "PEM lib" not in out.stderr and "Traceback" not in out.stderr


def test_the_agent_names_the_environment_variable_or_the_file_key(tls: TlsFiles, tmp_path: Path) -> None:
    junk = private(tmp_path / "junk.key", b"garbage\n")
    out = agent(tmp_path, env={"RIGMON_AGENT_TLS_CERT_FILE": str(tls.cert_file), "RIGMON_AGENT_TLS_KEY_FILE": str(junk)})
    assert out.returncode == 2 and out.stderr.splitlines()[-1].startswith(
        f"rigmon: environment RIGMON_AGENT_TLS_KEY_FILE {junk}: not a PEM private key")
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\ntls_cert_file = "{tmp_path / "gone.pem"}"\ntls_key_file = "{tls.key_file}"\n')
    out = agent(tmp_path, "--config", str(config))
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == f"rigmon: {config}: agent.tls_cert_file {tmp_path / 'gone.pem'}: No such file or directory"


@pytest.mark.parametrize(
    ("options", "environ", "file_text", "says"),
    [
        ({"tls_cert_file": "/c.pem"}, {}, "",
         "--tls-cert: a certificate serves HTTPS only with its private key: give --tls-key too"),
        ({"tls_key_file": "/k.pem"}, {}, "",
         "--tls-key: a private key serves HTTPS only with its certificate: give --tls-cert too"),
        ({}, {"RIGMON_AGENT_TLS_CERT_FILE": "/c.pem"}, "",
         "environment RIGMON_AGENT_TLS_CERT_FILE: a certificate serves HTTPS only with its private key: "
         "set RIGMON_AGENT_TLS_KEY_FILE (or agent.tls_key_file) too"),
        ({}, {}, '[agent]\ntls_key_file = "/k.pem"\n',
         "{file}: agent.tls_key_file: a private key serves HTTPS only with its certificate: set agent.tls_cert_file too"),
    ],
)
def test_half_of_https_asks_for_the_other_half_the_way_the_first_was_given(
        tmp_path: Path, options: dict[str, str], environ: dict[str, str], file_text: str, says: str) -> None:
    # `rigmon agent --tls-cert X` said "--tls-cert: agent.tls_cert_file and tls_key_file go together".
    from rigmon.cli_agent import AGENT_OPTIONS
    from rigmon.config import ConfigError, load_agent_config

    file = tmp_path / "agent.toml"
    file.write_text(file_text)
    with pytest.raises(ConfigError) as excinfo:
        load_agent_config(file, options, environ, options=AGENT_OPTIONS)
    assert str(excinfo.value) == says.format(file=file)
