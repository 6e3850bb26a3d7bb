"""The JSON-over-HTTP shape both control APIs of the real lane share (lane-control, fake kubelet).

Why one base: each API checks the same bearer token and answers JSON; only its routes differ.
A subclass names its token (``token``), its 401 hint (``TOKEN_HINT``) and handles one request in
``_handle(method)`` after ``authorized()``.
"""

from __future__ import annotations

import hmac
import json
from http.server import BaseHTTPRequestHandler
from typing import Any


class TokenJsonHandler(BaseHTTPRequestHandler):
    """Bearer-token check, JSON replies and the verbs; routing is the subclass's ``_handle``."""

    TOKEN_HINT = "a valid bearer token is required"

    def token(self) -> str:
        raise NotImplementedError

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reply(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode())

    def authorized(self) -> bool:
        """True for the right bearer token (compared in constant time); otherwise answers 401."""
        supplied = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if hmac.compare_digest(supplied.encode(), self.token().encode()):
            return True
        self._reply(401, {"error": self.TOKEN_HINT})
        return False

    def _handle(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")
