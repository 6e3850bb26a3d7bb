"""The built-in ISO server: HEAD, Range, only that one file; and its detached start/stop."""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._metal import iso_publish

CONTENT = bytes(range(256)) * 40  # 10240 bytes
TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[http.client.HTTPConnection, str]]:
    iso = tmp_path / "r730.iso"
    iso.write_bytes(CONTENT)
    server = iso_publish.IsoServer("127.0.0.1", 0, iso, TOKEN)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
    try:
        yield connection, urllib.parse.urlsplit(server.url).path
    finally:
        connection.close()
        server.shutdown()
        server.server_close()


def _request(
    connection: http.client.HTTPConnection, method: str, path: str, **headers: str
) -> http.client.HTTPResponse:
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    return response


def test_head_tells_size_and_ranges(served: tuple[http.client.HTTPConnection, str]) -> None:
    connection, path = served
    response = _request(connection, "HEAD", path)
    assert response.status == 200
    assert response.getheader("Content-Length") == str(len(CONTENT))
    assert response.getheader("Accept-Ranges") == "bytes"
    assert response.body == b""  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("header", "status", "first", "last"),
    [
        (None, 200, 0, len(CONTENT) - 1),
        ("bytes=0-9", 206, 0, 9),
        ("bytes=10000-", 206, 10000, len(CONTENT) - 1),
        ("bytes=-16", 206, len(CONTENT) - 16, len(CONTENT) - 1),
        ("bytes=10000-99999", 206, 10000, len(CONTENT) - 1),
    ],
)
def test_get_serves_ranges(
    served: tuple[http.client.HTTPConnection, str], header: str | None, status: int, first: int, last: int
) -> None:
    connection, path = served
    response = _request(connection, "GET", path, **({"Range": header} if header else {}))
    assert response.status == status
    assert response.body == CONTENT[first : last + 1]  # type: ignore[attr-defined]
    if status == 206:
        assert response.getheader("Content-Range") == f"bytes {first}-{last}/{len(CONTENT)}"


@pytest.mark.parametrize("header", ["bytes=20000-", "bytes=9-3", "bytes=-0", "items=0-1", "bytes=-"])
def test_unsatisfiable_range_is_416(served: tuple[http.client.HTTPConnection, str], header: str) -> None:
    connection, path = served
    response = _request(connection, "GET", path, Range=header)
    assert response.status == 416
    assert response.getheader("Content-Range") == f"bytes */{len(CONTENT)}"


@pytest.mark.parametrize(
    "path",
    [
        "/",
        f"/{TOKEN}/",
        f"/{TOKEN}/other.iso",
        "/r730.iso",
        "/ffffffffffffffffffffffffffffffff/r730.iso",
        "/../r730.iso",
    ],
)
def test_anything_else_is_404(served: tuple[http.client.HTTPConnection, str], path: str) -> None:
    connection, _unused = served
    for method in ("GET", "HEAD"):
        assert _request(connection, method, path).status == 404


def test_writes_are_refused(served: tuple[http.client.HTTPConnection, str]) -> None:
    connection, path = served
    response = _request(connection, "PUT", path)
    assert response.status == 405
    assert response.getheader("Allow") == "GET, HEAD"


def test_a_deleted_iso_is_404(served: tuple[http.client.HTTPConnection, str], tmp_path: Path) -> None:
    connection, path = served
    (tmp_path / "r730.iso").unlink()
    assert _request(connection, "HEAD", path).status == 404


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
    try:
        connection.request("HEAD", parts.path)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def _until(condition: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_detached_server_starts_is_found_and_stops(tmp_path: Path) -> None:
    iso = tmp_path / "r730.iso"
    iso.write_bytes(CONTENT)
    record = iso_publish.start(iso, "127.0.0.1", _free_port(), 600)
    try:
        assert _answers(record["url"])
        assert iso_publish.running(iso) == record
        assert iso_publish.pid_file(iso).is_file()
    finally:
        stopped = iso_publish.stop(iso)
    assert stopped is True
    assert _until(lambda: not _answers(record["url"]))
    assert iso_publish.running(iso) is None
    assert not iso_publish.pid_file(iso).exists()
    assert iso_publish.stop(iso) is False  # nothing left to stop


def test_detached_server_exits_when_the_iso_is_deleted(tmp_path: Path) -> None:
    iso = tmp_path / "r730.iso"
    iso.write_bytes(CONTENT)
    record = iso_publish.start(iso, "127.0.0.1", _free_port(), 600)
    try:
        iso.unlink()
        assert _until(lambda: iso_publish.running(iso) is None)
    finally:
        iso_publish.stop(iso)
    assert not _answers(record["url"])


def test_start_on_a_busy_port_fails_with_the_reason(tmp_path: Path) -> None:
    iso = tmp_path / "r730.iso"
    iso.write_bytes(CONTENT)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(OSError, match="exited at start"):
            iso_publish.start(iso, "127.0.0.1", busy.getsockname()[1], 600)
