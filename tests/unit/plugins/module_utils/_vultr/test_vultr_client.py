"""The Vultr client without a network: retry classification, errors, pagination, create recovery."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ApiError, NotFoundError
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import (
    VultrClient,
    VultrRetry,
    endpoint_url,
    should_retry_status,
)
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.errors import TransportError, map_error


@pytest.mark.parametrize(
    ("method", "status", "retry"),
    [
        ("POST", 429, True),
        ("POST", 503, True),
        ("POST", 500, False),
        ("POST", 502, False),
        ("POST", 504, False),
        ("GET", 500, True),
        ("GET", 502, True),
        ("DELETE", 500, True),
        ("PUT", 504, True),
        ("PATCH", 500, True),
        ("GET", 429, True),
        ("GET", 404, False),
        ("GET", 400, False),
        ("POST", 501, False),
    ],
)
def test_should_retry_status(method: str, status: int, retry: bool) -> None:
    assert should_retry_status(method, status) is retry
    assert VultrRetry(total=3, allowed_methods=frozenset({"GET"})).is_retry(method, status) is retry


def test_retry_never_replays_a_post_after_a_read_error() -> None:
    from urllib3.exceptions import ProtocolError

    retry = VultrRetry(total=3, read=3, allowed_methods=frozenset({"GET", "PUT", "DELETE", "PATCH"}))
    with pytest.raises(ProtocolError):
        retry.increment(method="POST", url="/x", error=ProtocolError("Connection aborted."))
    assert retry.increment(method="GET", url="/x", error=ProtocolError("Connection aborted.")).total == 2


def test_retry_exhausted_stops() -> None:
    assert VultrRetry(total=0).is_retry("GET", 503) is False


def test_retry_counts_into_the_client_counter() -> None:
    client = VultrClient("k", api_endpoint="http://127.0.0.1:9")
    retry = client.http_session.get_adapter("http://127.0.0.1:9").max_retries
    assert isinstance(retry, VultrRetry)
    retry.increment(method="GET", url="/x").increment(method="GET", url="/x")
    assert client.counter.retries == 2
    other = VultrClient("k", api_endpoint="http://127.0.0.1:9")
    assert other.counter.retries == 0  # per instance, no global


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        (None, "https://api.vultr.com/v2"),
        ("https://api.vultr.com", "https://api.vultr.com/v2"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v2"),
        ("http://127.0.0.1:8080/v2", "http://127.0.0.1:8080/v2"),
    ],
)
def test_endpoint_url(endpoint: str | None, url: str) -> None:
    assert endpoint_url(endpoint) == url
    assert VultrClient("k", api_endpoint=endpoint).url == url


def test_session_headers_and_tls() -> None:
    client = VultrClient("secret-key", validate_certs=False)
    assert client.http_session.headers["Content-Type"] == "application/json"
    assert client.http_session.headers["Authorization"] == "Bearer secret-key"
    assert client.http_session.verify is False
    assert VultrClient("k").http_session.verify is True


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (404, "Not found.", NotFoundError),
        (400, "Invalid resource ID", NotFoundError),
        (400, "Invalid NodePool ID", NotFoundError),
        (400, "Bad request.", ApiError),
        (500, "VKE server error", ApiError),
        (401, "Invalid API token.", ApiError),
    ],
)
def test_map_error(status: int, message: str, kind: type) -> None:
    error = map_error(status, message, method="GET", path="/kubernetes/clusters/x")
    assert error.__class__ is kind
    assert "/kubernetes/clusters/x" in error.msg


class FakeClient(VultrClient):
    """Scripted ``request`` answers (the fake transport): a value to return or an exception to raise, in order.

    Sleeps are recorded instead of slept.
    """

    def __init__(self, answers: list[Any]) -> None:
        super().__init__("k", api_endpoint="http://127.0.0.1:9")
        self.answers = answers
        self.sent: list[tuple[str, str, Any, Any]] = []
        self.slept: list[float] = []
        self.sleep = self.slept.append

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        self.sent.append((method.upper(), self._path(url), data, params))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_list_all_follows_cursors() -> None:
    client = FakeClient(
        [
            {"vke_clusters": [{"id": "a"}], "meta": {"links": {"next": "c1"}}},
            {"vke_clusters": [{"id": "b"}], "meta": {"links": {"next": ""}}},
        ]
    )
    assert [c["id"] for c in client.list_all("/kubernetes/clusters", "vke_clusters")] == ["a", "b"]
    assert [s[3].get("cursor") for s in client.sent] == [None, "c1"]
    assert client.sent[0][3]["per_page"] == 500


def lost() -> TransportError:
    return TransportError("no response", method="POST", url="/x")


def server_error(status: int = 500, retry_after: float | None = None) -> ApiError:
    return map_error(status, "boom", method="POST", path="/x", retry_after=retry_after)  # type: ignore[return-value]


CREATED = {"node_pool": {"id": "p"}}


# (POST answers, re-read results in order, returned (object, recovered), (POSTs sent, re-reads, sleeps))
CREATE_TABLE = [
    pytest.param([CREATED], [], ({"id": "p"}, False), (1, 0, 0), id="201"),
    pytest.param([server_error(), CREATED], [None], ({"id": "p"}, False), (2, 1, 1), id="500-absent-resend-201"),
    pytest.param([server_error()], [{"id": "found"}], ({"id": "found"}, True), (1, 1, 0), id="500-present-no-resend"),
    pytest.param([lost()], [{"id": "found"}], ({"id": "found"}, True), (1, 1, 0), id="lost-present"),
    pytest.param([lost(), CREATED], [None], ({"id": "p"}, False), (2, 1, 1), id="lost-absent-resend-201"),
    pytest.param(
        [server_error(), lost()],
        [None, {"id": "found"}],
        ({"id": "found"}, True),
        (2, 2, 1),
        id="500-absent-lost-present",
    ),
    pytest.param(
        [server_error(502), server_error(504), CREATED], [None, None], ({"id": "p"}, False), (3, 2, 2), id="502-504-201"
    ),
]


@pytest.mark.parametrize(("answers", "finds", "result", "counts"), CREATE_TABLE)
def test_create_rereads_and_resends_only_what_did_not_take_effect(
    answers: list[Any], finds: list[Any], result: tuple[dict[str, Any], bool], counts: tuple[int, int, int]
) -> None:
    client = FakeClient(list(answers))
    found = list(finds)
    calls: list[int] = []

    def find() -> Any:
        calls.append(1)
        return found.pop(0)

    assert client.create("/x", {"label": "a"}, "node_pool", find=find) == result
    posts = sum(1 for s in client.sent if s[0] == "POST")
    assert (posts, len(calls), len(client.slept)) == counts
    assert client.answers == []


def test_create_gives_up_after_three_500s_naming_the_endpoint() -> None:
    client = FakeClient([server_error(), server_error(), server_error()])
    with pytest.raises(ApiError) as info:
        client.create("/kubernetes/clusters", {}, "vke_cluster", find=lambda: None)
    assert info.value.status == 500
    assert "POST /kubernetes/clusters" in info.value.msg
    assert "3 times" in info.value.msg
    assert info.value.details["attempts"] == 3
    assert [s[0] for s in client.sent] == ["POST"] * 3
    assert len(client.slept) == 2  # between the sends, not after the last one


def test_create_gives_up_after_repeated_lost_responses() -> None:
    client = FakeClient([lost(), lost(), lost()])
    with pytest.raises(TransportError) as info:
        client.create("/x", {}, "node_pool", find=lambda: None, attempts=3)
    assert "POST /x" in info.value.msg
    assert len(client.sent) == 3


def test_create_server_error_is_final_raises_without_reread_or_resend() -> None:
    client = FakeClient([server_error()])
    with pytest.raises(ApiError) as info:
        client.create(
            "/x",
            {},
            "node_pool",
            find=lambda: pytest.fail("no re-read: the caller handles it"),
            server_error_is_final=True,
        )
    assert info.value.status == 500
    assert (len(client.sent), client.slept) == (1, [])


def test_create_server_error_is_final_still_recovers_a_lost_response() -> None:
    client = FakeClient([lost()])
    assert client.create("/x", {}, "node_pool", find=lambda: {"id": "f"}, server_error_is_final=True) == (
        {"id": "f"},
        True,
    )


def test_create_raises_client_errors_at_once() -> None:
    client = FakeClient([ApiError("bad", status=400)])
    with pytest.raises(ApiError):
        client.create("/x", {}, "node_pool", find=lambda: pytest.fail("no re-read after a 400"))


def test_resend_honours_retry_after_then_the_backoff() -> None:
    client = FakeClient([server_error(503, retry_after=7), server_error(), CREATED])
    assert client.create("/x", {}, "node_pool", find=lambda: None) == ({"id": "p"}, False)
    first, second = client.slept
    assert first == 7  # Retry-After, as the retry layer honours it
    assert 1.0 <= second <= 1.25  # backoff_factor 0.5 * 2**1, plus at most 0.25 s of jitter


@pytest.mark.parametrize(
    ("attempt", "error", "low", "high"),
    [
        (0, server_error(), 0.5, 0.75),
        (1, server_error(), 1.0, 1.25),
        (10, server_error(), 12.0, 12.25),  # capped at api_retry_max_delay (12)
        (0, server_error(503, retry_after=500), 120.0, 120.0),  # Retry-After capped like the retry layer
        (0, lost(), 0.5, 0.75),
    ],
)
def test_resend_delay(attempt: int, error: Exception, low: float, high: float) -> None:
    assert low <= VultrClient("k").resend_delay(attempt, error) <= high


class FakeResponse:
    """Just enough of ``requests.Response`` for ``request``."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        import requests

        self.raw = requests.Response()
        self.raw.status_code = status
        self.raw._content = body
        self.raw.headers.update(headers)


def test_req_keeps_retry_after_of_an_error_response() -> None:
    client = VultrClient("k", api_endpoint="http://127.0.0.1:9")
    answer = FakeResponse(
        503, b'{"error": "busy", "status": 503}', {"Content-Type": "application/json", "Retry-After": "4"}
    )
    client.http_session.request = lambda *a, **kw: answer.raw  # type: ignore[method-assign]
    with pytest.raises(ApiError) as info:
        client.call("POST", "/kubernetes/clusters", {})
    assert info.value.status == 503
    assert info.value.details["retry_after"] == 4.0
    assert info.value.details["error"] == "busy"
