"""The tests' client of the real lane's control API (``lane.py control``, see docs/testing/k8s-real.md).

Why: fault tests must run on the real kube-apiserver too, not only on the emulator. The lane
exports ``MP_REAL_LANE_CONTROL`` (its URL) next to ``MP_REAL_KUBECONFIG``; the bearer token is
the kubeconfig's own, so a test that can use the cluster can also break it, and nobody else.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k8s_real.kubehttp import Target

CONTROL_ENV = "MP_REAL_LANE_CONTROL"
# An outage blocks until the apiserver answers /readyz again: 10-40 s on a busy 2-core machine.
OUTAGE_HTTP_TIMEOUT = 300.0


class LaneControlError(Exception):
    """The control API answered an error (the message is its ``error``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"lane control -> {status}: {message}")
        self.status = status


@dataclass(frozen=True)
class AuditRecord:
    """One list or watch the tests' user sent, as the apiserver's audit log records it."""

    verb: str
    path: str
    query: str
    status: int | None
    user_agent: str


class LaneControl:
    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.token = token

    @classmethod
    def from_env(cls) -> LaneControl | None:
        """The running lane's control API, or None outside the lane (or with a lane without one).

        ``MP_REAL_LANE_CONTROL`` is set by ``lane.py run``; for a lane started by hand
        (``make k8s-real-up``) the URL is read from ``lane.json`` next to the kubeconfig.
        """
        kubeconfig = os.environ.get("MP_REAL_KUBECONFIG")
        if not kubeconfig:
            return None
        url = os.environ.get(CONTROL_ENV, "")
        if not url:
            lane_json = Path(kubeconfig).with_name("lane.json")
            if lane_json.is_file():
                url = json.loads(lane_json.read_text(encoding="utf-8")).get("control", "")
        if not url:
            return None
        return cls(url, Target.from_kubeconfig(kubeconfig).token)

    def call(self, method: str, path: str, body: Any = None, timeout: float = 60.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                message = json.loads(raw).get("error", raw.decode(errors="replace"))
            except ValueError:
                message = raw.decode(errors="replace")
            raise LaneControlError(exc.code, message) from None
        return json.loads(raw) if raw else None

    # -- the apiserver and the front door ----------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return self.call("GET", "/")

    def outage(self, seconds: float, *, wait: bool = True) -> dict[str, Any]:
        """Stop kube-apiserver (clients are refused), start it again ``seconds`` later with the same
        flags, certificates and etcd data; with ``wait`` return once it answers again."""
        return self.call("POST", "/apiserver/outage", {"seconds": seconds, "wait": wait}, timeout=OUTAGE_HTTP_TIMEOUT)

    def restart(self) -> dict[str, Any]:
        return self.call("POST", "/apiserver/restart", {"wait": True}, timeout=OUTAGE_HTTP_TIMEOUT)

    def wait_up(self, timeout: float = 240.0) -> dict[str, Any]:
        return self.call("GET", f"/apiserver/wait?timeout={timeout}", timeout=timeout + 10)

    def drop_watches(self) -> int:
        """Cut every connection through the front door (all open watches end mid-stream)."""
        return int(self.call("POST", "/watches/drop", {})["dropped"])

    def mark(self) -> int:
        """The current end of the request record: ``requests(since=mark())`` is what came after."""
        return int(self.call("GET", "/requests?since=1000000000")["next"])

    def requests(self, since: int = 0) -> list[AuditRecord]:
        body = self.call("GET", f"/requests?since={since}")
        return [
            AuditRecord(r["verb"], r["path"], r["query"], r.get("status"), r.get("user_agent", ""))
            for r in body["requests"]
        ]

    # -- the fake kubelet --------------------------------------------------------------------------
    def add_node(self, name: str, *, gpus: int, labels: dict[str, str], device_plugin: bool = True) -> dict[str, Any]:
        body = {"name": name, "gpus": gpus, "labels": labels, "device_plugin": device_plugin}
        return self.call("POST", "/kubelet/nodes", body)

    def update_node(self, name: str, **changes: Any) -> dict[str, Any]:
        return self.call("PATCH", f"/kubelet/nodes/{name}", changes)

    def remove_node(self, name: str) -> None:
        self.call("DELETE", f"/kubelet/nodes/{name}")

    def hold_pods(
        self, namespace: str, *, ready_after: float | None = None, stuck_at: str | None = None, crash_loop: bool = False
    ) -> dict[str, Any]:
        """Pods of ``namespace`` stay not ready (container ``stuck_at``), for ``ready_after`` s or until released."""
        body = {"ready_after": ready_after, "stuck_at": stuck_at, "crash_loop": crash_loop}
        return self.call("PUT", f"/kubelet/pod-rules/{namespace}", body)

    def release_pods(self, namespace: str) -> None:
        self.call("DELETE", f"/kubelet/pod-rules/{namespace}")

    def kubelet(self) -> dict[str, Any]:
        return self.call("GET", "/kubelet/")
