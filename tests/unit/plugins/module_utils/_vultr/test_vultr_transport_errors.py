"""What a request without an HTTP answer is reported as: the transport error mapping of the Vultr client.

requests wraps urllib3's errors differently depending on where they happen: a read timeout that
outlasted the retries is a ``ConnectionError(MaxRetryError(reason=ReadTimeoutError))``, one without
retries is a ``ReadTimeout``; a refused connection is a ``NewConnectionError``, which urllib3 makes a
subclass of ``ConnectTimeoutError``. Each shape below is built the way requests and urllib3 build it.
"""

from __future__ import annotations

from http.client import RemoteDisconnected
from typing import Any

import pytest
import requests
from urllib3.exceptions import (
    ConnectTimeoutError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import (
    CONNECT_TIMEOUT,
    CONNECTION_FAILED,
    CONNECTION_LOST,
    NO_RESPONSE,
    READ_TIMEOUT,
    TLS_FAILED,
    VultrClient,
    transport_error,
    transport_failure,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.errors import (
    TransportError,
    is_ambiguous_write_failure,
)

URL = "/v2/kubernetes/clusters"


def retries_exhausted(reason: Exception) -> MaxRetryError:
    return MaxRetryError(None, URL, reason=reason)  # type: ignore[arg-type]


def read_timeout() -> ReadTimeoutError:
    return ReadTimeoutError(None, URL, "Read timed out. (read timeout=1)")  # type: ignore[arg-type]


def chained_socket_timeout() -> requests.RequestException:
    """A requests error whose only trace of the timeout is its ``__context__``."""
    try:
        raise TimeoutError("timed out")
    except TimeoutError:
        try:
            raise requests.RequestException("while reading")
        except requests.RequestException as outer:
            return outer


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        # After the retries: requests maps MaxRetryError(ReadTimeoutError) to a plain ConnectionError.
        (requests.exceptions.ConnectionError(retries_exhausted(read_timeout())), READ_TIMEOUT),
        (requests.exceptions.ReadTimeout(read_timeout()), READ_TIMEOUT),
        (requests.exceptions.ReadTimeout("Read timed out."), READ_TIMEOUT),
        (requests.exceptions.ConnectionError(read_timeout()), READ_TIMEOUT),
        (chained_socket_timeout(), READ_TIMEOUT),
        (requests.exceptions.ConnectionError(TimeoutError("timed out")), READ_TIMEOUT),
        (
            requests.exceptions.ConnectTimeout(retries_exhausted(ConnectTimeoutError(None, "connect timed out"))),
            CONNECT_TIMEOUT,
        ),
        (requests.exceptions.ConnectTimeout("Connection to api.vultr.com timed out."), CONNECT_TIMEOUT),
        # A refused connection is a NewConnectionError, a subclass of ConnectTimeoutError: not a timeout.
        (
            requests.exceptions.ConnectionError(
                retries_exhausted(NewConnectionError(None, "Failed to establish a new connection: refused"))
            ),
            CONNECTION_FAILED,
        ),
        (requests.exceptions.ConnectionError(ConnectionRefusedError(111, "Connection refused")), CONNECTION_FAILED),
        (
            requests.exceptions.ConnectionError(
                ProtocolError("Connection aborted.", RemoteDisconnected("Remote end closed connection"))
            ),
            CONNECTION_LOST,
        ),
        (requests.exceptions.ConnectionError(ConnectionResetError(104, "Connection reset by peer")), CONNECTION_LOST),
        (requests.exceptions.ChunkedEncodingError(ProtocolError("Connection broken")), CONNECTION_LOST),
        (requests.exceptions.SSLError(retries_exhausted(SSLError("certificate verify failed"))), TLS_FAILED),
        (requests.exceptions.ConnectionError("something else"), NO_RESPONSE),
        (requests.exceptions.TooManyRedirects("Exceeded 30 redirects."), NO_RESPONSE),
    ],
    ids=lambda value: value if isinstance(value, str) else type(value).__name__,
)
def test_transport_failure_finds_the_cause_requests_wrapped(exc: Exception, kind: str) -> None:
    assert transport_failure(exc) == kind


@pytest.mark.parametrize(
    ("exc", "timeout", "attempts", "says", "never"),
    [
        (
            requests.exceptions.ConnectionError(retries_exhausted(read_timeout())),
            1,
            2,
            ["GET /kubernetes/clusters", "timed out after 1 s", "read timeout", "api_timeout", "on 2 attempts"],
            ["ConnectionError", "no response"],
        ),
        (
            requests.exceptions.ConnectTimeout("Connection timed out."),
            7.5,
            1,
            ["timed out after 7.5 s", "connect timeout", "api_timeout", "on 1 attempt;", "api_endpoint"],
            ["read timeout"],
        ),
        (
            requests.exceptions.ConnectionError(
                retries_exhausted(NewConnectionError(None, "Failed to establish a new connection"))
            ),
            60,
            6,
            ["no response (connection failed, ConnectionError)", "on 6 attempts", "api_endpoint"],
            ["timed out", "timeout"],
        ),
        (
            requests.exceptions.ConnectionError(ProtocolError("Connection aborted.", RemoteDisconnected("closed"))),
            60,
            1,
            ["no response (connection lost, ConnectionError)"],
            ["timed out", "timeout"],
        ),
        (
            requests.exceptions.SSLError(
                retries_exhausted(SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
            ),
            60,
            1,
            ["TLS certificate is not trusted (CERTIFICATE_VERIFY_FAILED)", "ca_cert"],
            ["timed out", "no response"],
        ),
    ],
)
def test_transport_error_message(
    exc: Exception, timeout: float, attempts: int, says: list[str], never: list[str]
) -> None:
    error = transport_error("GET", "/kubernetes/clusters", exc, timeout=timeout, attempts=attempts)
    assert isinstance(error, TransportError)
    assert is_ambiguous_write_failure(error)  # a POST without an answer is still re-read before a resend
    for text in says:
        assert text in error.msg, (text, error.msg)
    for text in never:
        assert text not in error.msg, (text, error.msg)
    assert error.details["transport"] == transport_failure(exc)
    assert (error.details["timeout"], error.details["attempts"]) == (timeout, attempts)


def test_req_reports_a_read_timeout_with_the_client_timeout_and_attempts() -> None:
    """``request`` maps what the session raised, counting the retries the session made on the way."""
    client = VultrClient("secret-key", api_endpoint="http://127.0.0.1:9", timeout=3)

    def timing_out(*args: Any, **kwargs: Any) -> Any:
        client.counter.retries += 2  # what VultrRetry.increment does for each retry
        raise requests.exceptions.ConnectionError(retries_exhausted(read_timeout()))

    client.http_session.request = timing_out  # type: ignore[method-assign]
    with pytest.raises(TransportError) as info:
        client.call("GET", "/kubernetes/clusters")
    assert "timed out after 3 s (read timeout" in info.value.msg
    assert "on 3 attempts" in info.value.msg
    assert "secret-key" not in info.value.msg
    assert info.value.details["url"] == "/kubernetes/clusters"


@pytest.mark.parametrize(
    ("validate_certs", "ca_cert", "verify"),
    [(True, None, True), (True, "/etc/proxy-ca.pem", "/etc/proxy-ca.pem"), (False, "/etc/proxy-ca.pem", False)],
)
def test_each_request_carries_the_verification_that_requests_environment_cannot_override(
    monkeypatch: pytest.MonkeyPatch, validate_certs: bool, ca_cert: str | None, verify: bool | str
) -> None:
    """requests lets REQUESTS_CA_BUNDLE replace a session's ``verify`` (psf/requests#3829): ca_cert would be ignored."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    client = VultrClient(
        "secret-key", api_endpoint="https://127.0.0.1:9", validate_certs=validate_certs, ca_cert=ca_cert
    )
    seen: list[Any] = []

    def answering(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("verify"))
        response = requests.Response()
        response.status_code = 200
        response.headers["Content-Type"] = "application/json"
        response._content = b"{}"
        return response

    client.http_session.request = answering  # type: ignore[method-assign]
    client.call("GET", "/plans")
    assert seen == [verify]
