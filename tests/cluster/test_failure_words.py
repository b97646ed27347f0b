"""Every httpx failure reads as plain words on the operator's screen, never a Python class name."""

from __future__ import annotations

import ssl

import httpx
import pytest

from rigmon.cluster.agent_answers import failure_reason


def under(exc: Exception, cause: BaseException) -> Exception:
    """``exc`` raised from ``cause``, as httpx raises its errors from httpcore's and the socket's."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise exc from inner
    except Exception as outer:  # noqa: BLE001 - the one just raised
        return outer


def verify_failed(code: int, message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    error.verify_code = code
    error.verify_message = message
    error.reason = "CERTIFICATE_VERIFY_FAILED"
    return error


def not_tls() -> ssl.SSLError:
    error = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1000)")
    error.reason = "WRONG_VERSION_NUMBER"
    return error


@pytest.mark.parametrize(("exc", "reason"), [
    (httpx.ReadError(""), "connection lost: the connection broke while reading the answer"),
    (httpx.WriteError(""), "connection lost: the connection broke while sending the request"),
    (httpx.WriteTimeout(""), "timed out sending the request"),
    (httpx.PoolTimeout(""), "timed out waiting for a free connection to the agent"),
    (httpx.RemoteProtocolError("illegal status line: bytearray(b'SSH-2.0')"),
     "protocol error: the answer is not valid HTTP (is a rigmon agent at this URL?): illegal status line: bytearray(b'SSH-2.0')"),
    (httpx.LocalProtocolError("Illegal header value b' x'"),
     "protocol error: this dashboard could not send the request: Illegal header value b' x'"),
    (httpx.CloseError("[Errno 32] Broken pipe"), "connection lost while closing it: [Errno 32] Broken pipe"),
    (httpx.ProxyError("407 Proxy Authentication Required"),
     "proxy failed (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY in the environment): 407 Proxy Authentication Required"),
    (httpx.UnsupportedProtocol("Request URL has an unsupported protocol 'ftp://'."),
     "not an http:// or https:// URL: Request URL has an unsupported protocol 'ftp://'."),
    (httpx.TooManyRedirects("Exceeded maximum allowed redirects."),
     "too many redirects (is the URL a rigmon agent's?): Exceeded maximum allowed redirects."),
    (httpx.DecodingError("Error -3 while decompressing data: incorrect header check"),
     ("cannot decode the answer (its Content-Encoding or text is broken): Error -3 while decompressing data: "
      "incorrect header check")),
    (httpx.InvalidURL("Invalid port: 'x'"), "not a valid URL: Invalid port: 'x'"),
    (httpx.StreamClosed(), ("the answer's stream was read wrongly: Attempted to read or stream content, but the "
                            "stream has been closed.")),
])
def test_each_httpx_family_in_plain_words(exc: Exception, reason: str) -> None:
    assert failure_reason(exc) == reason


def test_an_untrusted_certificate_says_so_and_what_to_give() -> None:
    exc = under(httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed "
                                   "certificate (_ssl.c:1000)"), verify_failed(18, "self-signed certificate"))
    assert failure_reason(exc) == ("TLS failure: certificate not trusted: self-signed certificate "
                                   "(give the node's CA with ca_file / --ca-file)")


def test_a_certificate_for_another_name_is_a_hostname_mismatch() -> None:
    message = "Hostname mismatch, certificate is not valid for 'node02'."
    exc = under(httpx.ConnectError(f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}"),
                verify_failed(62, message))
    assert failure_reason(exc) == "TLS failure: hostname mismatch: hostname mismatch, certificate is not valid for 'node02'."


def test_https_to_a_plain_agent_says_it_does_not_speak_https() -> None:
    exc = under(httpx.ConnectError("[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1000)"), not_tls())
    assert failure_reason(exc) == "TLS failure: the agent does not speak HTTPS (use http:// for it)"


@pytest.mark.parametrize("exc", [
    httpx.ReadError(""), httpx.RemoteProtocolError("x"), httpx.LocalProtocolError("x"), httpx.CloseError(""),
    httpx.ProxyError(""), httpx.UnsupportedProtocol(""), httpx.NetworkError(""), httpx.TooManyRedirects(""),
    httpx.DecodingError(""), httpx.TransportError(""), httpx.InvalidURL(""), httpx.StreamConsumed(),
    httpx.HTTPError(""), RuntimeError(""),
])
def test_no_class_name_reaches_the_screen(exc: Exception) -> None:
    reason = failure_reason(exc)
    assert type(exc).__name__ not in reason and reason and not reason.endswith(": ")
