"""Checking the agent's TLS certificate and key before it serves: which file, named how, and what is wrong."""

from __future__ import annotations

import ssl

from rigmon.agent.server import StartupError, check_private_file, read_small_file

#: Largest certificate (chain) or key file read for its check: a PEM chain is a few kB.
MAX_TLS_FILE_BYTES = 1024 * 1024
#: What a certificate or key file must be, in errors.
PEM_FILE = "a PEM file"


def check_tls_files(cert_file: str, key_file: str, cert_origin: str = "tls_cert_file",
                    key_origin: str = "tls_key_file") -> None:
    """The certificate and key must load as the server loads them, and the key be private to its owner.

    uvicorn loads them only as it starts serving, and OpenSSL's error named neither the file nor what
    is wrong with it (``[SSL] PEM lib (_ssl.c:3905)``). They are loaded here first; a failure is then
    looked into to say which file and why.

    Args:
        cert_file: the PEM certificate (chain).
        key_file: its PEM private key.
        cert_origin: what named the certificate, as the operator gave it (``--tls-cert``; see
            `rigmon.config.setting_origin`).
        key_origin: what named the key (``--tls-key``).

    Raises:
        StartupError: one line naming the setting, the file and what is wrong: not found, not
            readable, not a PEM certificate, not a PEM private key (or one under a passphrase), or a
            key that does not match the certificate.
    """
    cert = read_small_file(cert_file, cert_origin, MAX_TLS_FILE_BYTES, PEM_FILE)
    key = read_small_file(key_file, key_origin, MAX_TLS_FILE_BYTES, PEM_FILE)
    check_private_file(key_file, key_origin)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # A passphrase is never asked for (the agent has no one to ask; uvicorn would prompt on the terminal).
        context.load_cert_chain(cert_file, key_file, password=lambda: b"")
    except ssl.SSLError as exc:
        raise StartupError(_tls_problem(cert, key, exc, f"{cert_origin} {cert_file}", f"{key_origin} {key_file}")) \
            from None
    except OSError as exc:
        raise StartupError(f"{cert_origin} {cert_file} or {key_origin} {key_file}: {exc.strerror or exc}") from None


#: PEM block headers of a private key (PKCS#8, PKCS#1 RSA, SEC1 EC, and PKCS#8 under a passphrase).
_KEY_BLOCKS = (b"-----BEGIN PRIVATE KEY-----", b"-----BEGIN RSA PRIVATE KEY-----", b"-----BEGIN EC PRIVATE KEY-----",
               b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
_CERT_BLOCK = b"-----BEGIN CERTIFICATE-----"


def _tls_problem(cert: bytes, key: bytes, exc: ssl.SSLError, cert_named: str, key_named: str) -> str:
    """What is wrong with a certificate and key that OpenSSL refused with ``exc``, naming the file at fault.

    Args:
        cert: the certificate file's bytes.
        key: the key file's bytes.
        cert_named: ``<setting> <file>`` of the certificate; ``key_named`` likewise of the key.
    """
    if _CERT_BLOCK not in cert:
        if any(block in cert for block in _KEY_BLOCKS):
            return f"{cert_named}: not a PEM certificate: it holds a private key (are the certificate and key swapped?)"
        return f"{cert_named}: not a PEM certificate (no {_CERT_BLOCK.decode()} block)"
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cadata=cert.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError):
        return f"{cert_named}: not a PEM certificate OpenSSL can read (a damaged CERTIFICATE block)"
    if not any(block in key for block in _KEY_BLOCKS):
        if _CERT_BLOCK in key:
            return f"{key_named}: not a PEM private key: it holds a certificate (are the certificate and key swapped?)"
        return f"{key_named}: not a PEM private key (no -----BEGIN ... PRIVATE KEY----- block)"
    if b"ENCRYPTED" in key:
        return (f"{key_named}: the key is encrypted with a passphrase, which the agent cannot ask for; "
                "give it the key unencrypted (mode 600)")
    if exc.reason == "KEY_VALUES_MISMATCH":
        return f"{key_named}: the key does not match the certificate {cert_named}"
    return f"{cert_named} with {key_named}: OpenSSL cannot load them ({exc.reason or exc})"
