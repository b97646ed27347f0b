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
