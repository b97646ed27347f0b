"""Checking the agent's TLS certificate and key before it serves: which file, named how, and what is wrong."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable

from rigmon.agent.server import StartupError, check_private_file, read_small_file
from rigmon.agent.tls_edge import Unalerted

log = logging.getLogger(__name__)

#: Largest certificate (chain) or key file read for its check: a PEM chain is a few kB.
MAX_TLS_FILE_BYTES = 1024 * 1024
#: What a certificate or key file must be, in errors.
PEM_FILE = "a PEM file"
#: Seconds between warnings about failed TLS handshakes (a scanner must not flood the log).
HANDSHAKE_LOG_EVERY_S = 60.0
#: OpenSSL's reasons for a handshake the client broke off because it does not trust the certificate
#: (Go, so Prometheus, sends "bad certificate"; OpenSSL and curl "unknown CA"), or for a name the
#: certificate lacks.
_DISTRUSTED = ("SSLV3_ALERT_BAD_CERTIFICATE", "TLSV1_ALERT_UNKNOWN_CA", "SSLV3_ALERT_CERTIFICATE_UNKNOWN")
#: What a TLS object raises that is no failure: more to read or write, or a client that left.
_NOT_FAULTS = (ssl.SSLWantReadError, ssl.SSLWantWriteError, ssl.SSLZeroReturnError, ssl.SSLEOFError)


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
    check_private_file(key_file, key_origin, PEM_FILE)
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


class HandshakeFaults:
    """Counts TLS handshakes that failed and logs at most one warning a minute of each kind, saying what to fix.

    Without it they were silent (asyncio logs a failed handshake only in debug mode): Prometheus said
    ``x509: certificate signed by unknown authority`` and the agent's log said nothing. Failures OpenSSL
    raises come through `watch_handshakes`; those it cannot see (`Unalerted`: a client that left without a
    TLS alert, a stalled handshake, bytes that are not TLS) through `rigmon.agent.tls_edge.TlsEdge`.

    Args:
        cert_file: the agent's certificate, named in the advice to a client that does not trust it.
    """

    def __init__(self, cert_file: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.cert_file = cert_file
        self.failed = 0
        self._clock = clock
        #: When each kind of failure (OpenSSL's reason, or an `Unalerted`) was last logged: one kind does
        #: not hide another.
        self._last_log: dict[str, float] = {}

    def watch(self, context: ssl.SSLContext) -> None:
        """Count the failures OpenSSL raises in the handshakes of the server ``context`` (`watch_handshakes`)."""
        watch_handshakes(context, self)

    def note(self, exc: ssl.SSLError) -> None:
        """A handshake failed with ``exc``."""
        self._count(str(exc.reason), self.why(exc))

    def note_unalerted(self, kind: Unalerted) -> None:
        """A handshake ended as ``kind`` says, with no TLS alert and nothing raised by OpenSSL."""
        self._count(kind, self.why_unalerted(kind))

    def _count(self, kind: str, why: str) -> None:
        self.failed += 1
        now = self._clock()
        if now - self._last_log.get(kind, float("-inf")) < HANDSHAKE_LOG_EVERY_S:
            return
        self._last_log[kind] = now
        log.warning("%s (%d failed TLS handshakes since the start; at most one of each kind is logged a minute)",
                    why, self.failed)

    def why(self, exc: ssl.SSLError) -> str:
        """What a handshake that failed with ``exc`` says about its client, and what to fix."""
        if exc.reason in _DISTRUSTED:
            return (f"a client refused this agent's certificate {self.cert_file} ({exc.reason}): give it that file "
                    "as its CA (a dashboard's ca_file, Prometheus' tls_config ca_file) and reach the agent by a name "
                    "the certificate holds")
        if exc.reason == "WRONG_VERSION_NUMBER":
            # OpenSSL's word for a first record that is not TLS (a plain HTTP request is answered before it).
            return f"{_NOT_TLS} ({exc.reason})"
        return f"a TLS handshake failed: {exc.reason or exc}"

    def why_unalerted(self, kind: Unalerted) -> str:
        """What a handshake that ended as ``kind`` says about its client, and what to fix."""
        if kind is Unalerted.LEFT:
            return ("a client left during the TLS handshake without a TLS alert (an asyncio or Python client does "
                    f"so when it refuses this agent's certificate {self.cert_file}: give it that file as its CA, "
                    "and reach the agent by a name the certificate holds)")
        if kind is Unalerted.TIMED_OUT:
            return ("a client began a TLS handshake and did not complete it in time (head_timeout_s): a stalled "
                    "client or network")
        return f"{_NOT_TLS}, and left or stalled"


#: What a client that sent neither a TLS handshake nor an HTTP request is said to be.
_NOT_TLS = ("a client sent bytes that are neither TLS nor HTTP (another protocol's client on this port, or a port "
            "scanner)")


def watch_handshakes(context: ssl.SSLContext, faults: HandshakeFaults) -> None:
    """Have every failed handshake of the server ``context`` counted and logged by ``faults``.

    asyncio makes each connection's TLS object with ``context.wrap_bio``, which builds it from
    ``context.sslobject_class``: its handshake is watched there. A client that refuses the certificate
    says so in an alert that ends the handshake (under TLS 1.3 too: the server waits for the client's
    Finished); a client that leaves without one (asyncio's drops its alert) is counted by the agent's
    `rigmon.agent.tls_edge.TlsEdge` (`HandshakeFaults.note_unalerted`).
    """

    class WatchedSSLObject(ssl.SSLObject):
        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except _NOT_FAULTS:
                raise
            except ssl.SSLError as exc:
                faults.note(exc)
                raise

    context.sslobject_class = WatchedSSLObject
