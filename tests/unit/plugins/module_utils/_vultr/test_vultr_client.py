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
    retry = client._session.get_adapter("http://127.0.0.1:9").max_retries
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
    assert client._session.headers["Content-Type"] == "application/json"
    assert client._session.headers["Authorization"] == "Bearer secret-key"
    assert client._session.verify is False
    assert VultrClient("k")._session.verify is True


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
    """Scripted ``_req`` answers: a value to return or an exception to raise, in order."""

    def __init__(self, answers: list[Any]) -> None:
        super().__init__("k", api_endpoint="http://127.0.0.1:9")
        self.answers = answers
        self.sent: list[tuple[str, str, Any, Any]] = []

    def _req(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
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


def server_error() -> ApiError:
    return ApiError("boom", status=500, method="POST", url="/x")


@pytest.mark.parametrize(
    ("answers", "finds", "result", "posts"),
    [
        ([{"node_pool": {"id": "p"}}], [], ({"id": "p"}, False), 1),
        ([lost()], [{"id": "found"}], ({"id": "found"}, True), 1),
        ([server_error()], [{"id": "found"}], ({"id": "found"}, True), 1),
        ([lost(), {"node_pool": {"id": "p2"}}], [None], ({"id": "p2"}, False), 2),
    ],
)
def test_create_rereads_instead_of_replaying(
    answers: list[Any], finds: list[Any], result: tuple[dict[str, Any], bool], posts: int
) -> None:
    client = FakeClient(answers)
    assert client.create("/x", {"label": "a"}, "node_pool", find=lambda: finds.pop(0)) == result
    assert sum(1 for s in client.sent if s[0] == "POST") == posts


def test_create_does_not_replay_a_500_that_created_nothing() -> None:
    client = FakeClient([server_error()])
    with pytest.raises(ApiError) as info:
        client.create("/x", {}, "node_pool", find=lambda: None)
    assert info.value.status == 500
    assert len(client.sent) == 1


def test_create_gives_up_after_repeated_lost_responses() -> None:
    client = FakeClient([lost(), lost(), lost()])
    with pytest.raises(TransportError):
        client.create("/x", {}, "node_pool", find=lambda: None, attempts=3)
    assert len(client.sent) == 3


def test_create_raises_client_errors_at_once() -> None:
    client = FakeClient([ApiError("bad", status=400)])
    with pytest.raises(ApiError):
        client.create("/x", {}, "node_pool", find=lambda: pytest.fail("no re-read after a 400"))
