"""A self-signed certificate for the agent, made with the openssl command line tool."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import tempfile
from pathlib import Path

#: Days the certificate is valid: it is pinned by each dashboard (ca_file), not by a public CA.
VALID_DAYS = 3650


class TlsError(Exception):
    """The certificate could not be made; the message says why."""


def subject_alt_names(names: list[str]) -> str:
    """``DNS:a,DNS:b,IP:10.0.0.1`` for openssl's subjectAltName (duplicates dropped)."""
    entries: list[str] = []
    for name in dict.fromkeys(n for n in names if n):
        try:
            entries.append(f"IP:{ipaddress.ip_address(name)}")
        except ValueError:
            entries.append(f"DNS:{name}")
    return ",".join(entries)


def make_self_signed(names: list[str]) -> tuple[bytes, bytes]:
    """A P-256 key and a certificate for ``names`` (host names and addresses).

    The certificate is its own CA (basicConstraints CA:TRUE), so a dashboard verifies the
    agent by giving this certificate as ``ca_file``.

    Returns:
        The certificate and the private key, PEM.

    Raises:
        TlsError: openssl is missing or failed.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TlsError("openssl is not installed (apt-get install openssl), or give --no-tls")
    with tempfile.TemporaryDirectory(prefix="rigmon-tls-") as tmp:
        cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        command = [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                   "-nodes", "-days", str(VALID_DAYS), "-subj", f"/CN={names[0]}/O=rigmon agent",
                   "-keyout", str(key), "-out", str(cert),
                   "-addext", f"subjectAltName={subject_alt_names(names)}",
                   "-addext", "basicConstraints=critical,CA:TRUE",
                   "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
                   "-addext", "extendedKeyUsage=serverAuth"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise TlsError(f"openssl failed: {result.stderr.strip()[-500:]}")
        return cert.read_bytes(), key.read_bytes()


def certificate_names_of(cert: Path) -> set[str] | None:
    """The host names and addresses the PEM certificate ``cert`` is valid for (its subjectAltName).

    Addresses are normalised (``::1``, not openssl's ``0:0:0:0:0:0:0:1``). ``None`` when they cannot
    be read (openssl missing or failing, a file this user cannot read).
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    result = subprocess.run([openssl, "x509", "-in", str(cert), "-noout", "-ext", "subjectAltName"],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None
    # X509v3 Subject Alternative Name: 
    #     DNS:v100-a, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1
    names: set[str] = set()
    for line in result.stdout.splitlines()[1:]:
        for entry in line.split(","):
            kind, _, value = entry.strip().partition(":")
            if kind == "DNS":
                names.add(value.lower())
            elif kind == "IP Address":
                names.add(normal_name(value))
    return names


def normal_name(name: str) -> str:
    """``name`` as `certificate_names_of` gives it: an address normalised, a host name in lower case."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.lower()
