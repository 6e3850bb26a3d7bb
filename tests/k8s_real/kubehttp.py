"""A minimal Kubernetes REST client over the standard library, for the real-apiserver lane.

Why not the ``kubernetes`` package: the lane supervisor and the fake kubelet need a handful of
calls (readiness probes, merge-patches on ``/status``, one watch stream) and must keep working
whatever the generated client's model classes do with a 1.20 server's answers (the 37.x client is
strict about fields a 1.20 server does not send). Raw JSON avoids that whole class of problems.

The kubeconfig is the one ``scripts/k8s-real/lane.py`` writes: one cluster with
``certificate-authority-data`` (TLS is verified) and one user with a bearer ``token``.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import yaml

MERGE_PATCH = "application/merge-patch+json"
JSON = "application/json"


class KubeHttpError(Exception):
    """A non-2xx answer; ``status`` is the HTTP status, ``body`` the decoded Status (if any)."""

    def __init__(self, status: int, method: str, path: str, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path} -> {status}: {message}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Target:
    """Where and how to reach the API server."""

    server: str
    token: str
    ca_pem: bytes | None = None

    @classmethod
    def from_kubeconfig(cls, path: Path | str) -> Target:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        current = config.get("current-context")
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        ca = cluster.get("certificate-authority-data")
        return cls(server=cluster["server"], token=user["token"], ca_pem=base64.b64decode(ca) if ca else None)


class KubeHttp:
    """JSON requests against one API server; a new connection per call (threads may share it)."""

    def __init__(self, target: Target, timeout: float = 30.0) -> None:
        self.target = target
        self.timeout = timeout
        parts = urlsplit(target.server)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 443
        self._ssl = ssl.create_default_context()
        if target.ca_pem:
            self._ssl = ssl.create_default_context(cadata=target.ca_pem.decode("ascii"))

    def _connection(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self._host, self._port, context=self._ssl, timeout=timeout)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.target.token}", "Accept": JSON}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    @staticmethod
    def _url(path: str, query: dict[str, Any] | None) -> str:
        return f"{path}?{urlencode(query)}" if query else path

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON (or text) body, raise ``KubeHttpError`` on >= 300."""
        conn = self._connection(timeout or self.timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            conn.request(
                method,
                self._url(path, query),
                body=payload,
                headers=self._headers(content_type if payload is not None else None),
            )
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            decoded: Any = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode("utf-8", "replace")
        if response.status >= 300:
            raise KubeHttpError(response.status, method, path, decoded)
        return decoded

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 240) -> Iterator[dict[str, Any]]:
        """Yield watch events (``{"type": ..., "object": ...}``) until the server ends the stream."""
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        conn = self._connection(timeout_seconds + 30)
        try:
            conn.request("GET", self._url(path, query), headers=self._headers(None))
            response = conn.getresponse()
            if response.status >= 300:
                raise KubeHttpError(response.status, "WATCH", path, response.read().decode("utf-8", "replace"))
            while True:
                line = response.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()
