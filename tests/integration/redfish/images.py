"""A tiny HTTP server for ISO images, on 127.0.0.1 (BMC emulators really download the URL)."""

from __future__ import annotations

import functools
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


class ImageServer:
    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="rf-images-")
        root = Path(self._tmp.name)
        (root / "boot.iso").write_bytes(b"\0" * 4096)
        (root / "other.iso").write_bytes(b"\1" * 4096)
        handler = functools.partial(_QuietHandler, directory=str(root))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> ImageServer:
        self._thread.start()
        return self

    def url(self, name: str = "boot.iso") -> str:
        return f"http://127.0.0.1:{self._server.server_port}/{name}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._tmp.cleanup()
