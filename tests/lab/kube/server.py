"""A Kubernetes API emulator for tests and the lab: HTTPS, bearer token, kubeconfig, faults, GPU sims.

Why: everything after provisioning talks to Kubernetes, and this machine and CI have no Docker, so
no kind. The emulator answers the kubernetes Python client (typed and DynamicClient), kubernetes.core
(k8s, k8s_info, helm) and kubectl like kube-apiserver 1.34 would, within the limits documented in
docs/lab/kube.md. It runs in-process (``KubeEmulator``, a thread) or as a script (``labctl``)::

    python -m lab.kube.server --host 127.0.0.1 --port N [--delay-scale F] [--state-dir DIR]
                             [--gpu-nodes N --gpu-product P --gpus-per-node G]

which writes ``<state-dir>/kube-lab.kubeconfig``. Faults are injected in-process
(``make_unavailable``, ``fail_next``, ``drop_watches``) or through ``/lab/...`` endpoints (no auth).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import random
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import yaml

from lab.common.emulator import LOOPBACK, emulator_arguments, free_port, serve_until_signalled
from lab.common.tls import issue_server_certificate
from lab.kube.api import ApiError, ApiServer, Request, Response
from lab.kube.controllers import Controllers, Scheduler, seed_namespaces
from lab.kube.store import Store

LOG = logging.getLogger("lab.kube")
KUBECONFIG_NAME = "kube-lab.kubeconfig"
DEFAULT_TOKEN = "lab-kube-token"  # a well-known lab credential: the lab is loopback only

__all__ = ["ApiError", "KubeEmulator", "RequestRecord"]


# What kube-apiserver says with each status a storm answers (k8s.io/apiserver's responsewriters and APF filter).
STORM_ANSWERS = {
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: lab fault storm"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
}


class RequestRecord(NamedTuple):
    method: str
    path: str
    query: str
    status: int


def _make_tls(directory: Path, name: str, address: str = LOOPBACK) -> tuple[Path, Path, Path]:
    """A self-signed CA and a server certificate for 127.0.0.1/localhost (and ``address``, the address the API
    listens on, as kubeadm puts the advertise address in the apiserver certificate), written to ``directory``."""
    names = ["kube-apiserver", "localhost", "kubernetes", "kubernetes.default", LOOPBACK]
    tls = issue_server_certificate(f"{name}-lab-kube-ca", names if address in names else [*names, address])
    ca_path, cert_path, key_path = (
        directory / f"kube-{name}-{part}" for part in ("ca.crt", "apiserver.crt", "apiserver.key")
    )
    ca_path.write_bytes(tls.ca_pem)
    cert_path.write_bytes(tls.cert_pem + tls.ca_pem)
    key_path.write_bytes(tls.key_pem)
    key_path.chmod(0o600)
    return ca_path, cert_path, key_path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as kube-apiserver's Go net/http sets on every connection: the headers and the body are two writes,
    # and with Nagle's algorithm the body waits for the client's delayed ACK of the headers (40 ms on Linux), which
    # made every request to the lab 40 ms slower than to a real API server.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("%s " + format, self.address_string(), *args)

    def setup(self) -> None:
        super().setup()
        self.server.emulator._connections.add(self.connection)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.emulator._connections.discard(self.connection)

    def _serve(self) -> None:
        emulator = self.server.emulator
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request.build(self.command, split.path, split.query, dict(self.headers.items()), body)
        if split.path.startswith("/lab/"):
            self._send(emulator._control(request))
            return
        response = emulator._fault()
        if response is None and not emulator.authenticates(self.headers.get("Authorization", "")):
            response = Response(401, ApiError(401, "Unauthorized", "Unauthorized").status())
        if response is None:
            response = emulator.server_api.handle(request)
        emulator._record(RequestRecord(self.command, split.path, split.query, response.status))
        self._send(response)

    def _send(self, response: Response) -> None:
        if response.stream is not None:
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in response.stream:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            finally:
                close = getattr(response.stream, "close", None)
                if close:
                    close()
            return
        data = response.json_bytes()
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    emulator: KubeEmulator
    ssl_context: ssl.SSLContext

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = self.socket.accept()
        # The TLS handshake runs in the handler thread, so a slow client cannot stall accept().
        return self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        LOG.debug("connection from %s ended with an error", client_address, exc_info=True)


class KubeEmulator:
    """The emulator as an in-process object: ``start()``, ``url``, ``kubeconfig_path``, ``stop()``."""

    def __init__(
        self,
        delay_scale: float = 0.0,
        token: str = DEFAULT_TOKEN,
        name: str = "lab",
        *,
        state_dir: Path | str | None = None,
        host: str = LOOPBACK,
        port: int | None = None,
        workload_controller: bool = True,
        ready_delay: float = 1.0,
    ) -> None:
        self.delay_scale = delay_scale
        self.token = token
        self.name = name
        self.host = host
        self.port = port
        self._state_dir = Path(state_dir) if state_dir else None
        self._tmp: str | None = None
        self.store = Store()
        self.scheduler = Scheduler()
        self.server_api = ApiServer(self.store, self.scheduler.schedule, delay_scale)
        self.controllers = Controllers(self.server_api, self.scheduler, delay_scale, workload_controller, ready_delay)
        self.requests: list[RequestRecord] = []
        self._lock = threading.Lock()
        self._fail_next: list[int] = []
        self._fail_retry_after: int | None = None
        self._unavailable_until = 0.0
        self._unavailable_mode = "503"
        self._storm: list[tuple[int, float]] = []
        self._storm_random = random.Random(0)
        self.stormed = 0  # requests the storm answered
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._reopen: threading.Timer | None = None
        from lab.kube.gpu import GpuSimulator

        self.gpu = GpuSimulator(self)
        self.kubeconfig_path = Path()
        self.ca_path = Path()

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def state_dir(self) -> Path:
        if self._state_dir is None:
            self._tmp = tempfile.mkdtemp(prefix=f"kube-{self.name}-")
            self._state_dir = Path(self._tmp)
        return self._state_dir

    def start(self) -> KubeEmulator:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.ca_path, cert, key = _make_tls(self.state_dir, self.name, self.host)
        self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._ssl.load_cert_chain(cert, key)
        self._ssl.set_alpn_protocols(["http/1.1"])
        self.server_api.ca_bundle = self.ca_path.read_text()
        seed_namespaces(self.server_api)
        if self.port is None:
            self.port = free_port(self.host)
        self._listen()
        self.kubeconfig_path = self.state_dir / KUBECONFIG_NAME
        self._write_kubeconfig()
        return self

    def _listen(self) -> None:
        server = _HTTPServer((self.host, int(self.port or 0)), _Handler)
        server.emulator = self
        server.ssl_context = self._ssl
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=f"kube-{self.name}", daemon=True
        )
        self._thread.start()

    def _close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        for conn in list(self._connections):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.store.drop_watches()

    def _write_kubeconfig(self) -> None:
        ca_data = base64.b64encode(self.ca_path.read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": {"server": self.url, "certificate-authority-data": ca_data}}],
            "users": [{"name": f"{self.name}-admin", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": self.name,
                    "context": {"cluster": self.name, "user": f"{self.name}-admin", "namespace": "default"},
                }
            ],
            "current-context": self.name,
            "preferences": {},
        }
        tmp = self.kubeconfig_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False))
        tmp.chmod(0o600)
        tmp.replace(self.kubeconfig_path)

    def suspend(self) -> None:
        """Stop answering (connections refused) but keep every object: the host running this API went down."""
        self._close_listener()

    def resume(self) -> None:
        """Answer again on the same address, port and CA after ``suspend`` (the host came back up)."""
        if self._server is None:
            self._listen()

    def authenticates(self, authorization: str) -> bool:
        """Whether an ``Authorization`` header carries a token this API accepts: the emulator's own, or the
        token of a ``kubernetes.io/service-account-token`` Secret whose ServiceAccount exists (what the token
        controller filled in, ``lab.kube.controllers.Controllers.service_account_token``)."""
        scheme, _sep, token = authorization.partition(" ")
        if scheme != "Bearer" or not token:
            return False
        if token == self.token:
            return True
        return self.controllers.service_account_for(token) is not None

    def stop(self) -> None:
        if self._reopen is not None:
            self._reopen.cancel()
        self._close_listener()
        self.scheduler.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> KubeEmulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- faults ---------------------------------------------------------------------------------

    def make_unavailable(self, seconds: float, mode: str = "refuse") -> None:
        """The API is unreachable for ``seconds``: connections refused (``refuse``) or 503 answers (``503``)."""
        if mode not in ("refuse", "503"):
            raise ValueError("mode must be 'refuse' or '503'")
        with self._lock:
            self._unavailable_until = time.monotonic() + seconds
            self._unavailable_mode = mode
        if mode == "refuse":
            self._close_listener()
            self._reopen = threading.Timer(seconds, self._listen)
            self._reopen.daemon = True
            self._reopen.start()

    def fail_next(self, n: int, status: int = 500, *, retry_after: int | None = None) -> None:
        """The next ``n`` API requests fail with ``status`` (a Kubernetes Status body), with a ``Retry-After`` header
        when ``retry_after`` is given."""
        with self._lock:
            self._fail_next = [status] * n
            self._fail_retry_after = retry_after

    def drop_watches(self) -> int:
        """End every open watch stream now (clients see the stream close mid-way)."""
        return self.store.drop_watches()

    def storm(self, faults: list[tuple[int, float]], *, seed: int) -> None:
        """From now on answer API requests at random with the ``(status, probability)`` faults, each tried in turn on
        the requests the earlier ones let through, drawn from a generator seeded with ``seed`` (a failing seed
        replays); an empty list calms it. Each answer carries ``Retry-After: 1``, as kube-apiserver's own 429 of
        priority and fairness does (a 503 with it is what an apiserver shutting down or a load balancer in front of one
        sends); requests under ``/lab/`` are never stormed."""
        for status, _probability in faults:
            if status not in STORM_ANSWERS:
                raise ValueError(f"storm status {status} is not one of {sorted(STORM_ANSWERS)}")
        with self._lock:
            self._storm = list(faults)
            self._storm_random = random.Random(seed)

    def compact(self) -> None:
        """Forget the watch event log: a watch from an older resourceVersion gets 410 Gone."""
        self.store.compact()

    def _fault(self) -> Response | None:
        with self._lock:
            if time.monotonic() < self._unavailable_until:
                body = ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request")
                return Response(503, body.status(), headers={"Retry-After": "1"})
            for status, probability in self._storm:
                if self._storm_random.random() < probability:
                    self.stormed += 1
                    reason, message = STORM_ANSWERS[status]
                    return Response(status, ApiError(status, reason, message).status(), headers={"Retry-After": "1"})
            if self._fail_next:
                status = self._fail_next.pop(0)
                headers = {} if self._fail_retry_after is None else {"Retry-After": str(self._fail_retry_after)}
                return Response(
                    status,
                    ApiError(
                        status,
                        "InternalError",
                        "an error on the server (lab fault injection) has prevented the request from succeeding",
                    ).status(),
                    headers=headers,
                )
        return None

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self.requests.append(record)

    def _control(self, request: Request) -> Response:  # noqa: PLR0911 - one branch per endpoint
        """Out-of-process fault and simulator control under ``/lab/`` (loopback, no auth)."""
        query = request.query
        body = json.loads(request.body) if request.body.strip() else {}
        path = request.path.rstrip("/")
        try:
            if path == "/lab/unavailable":
                seconds = float(query.get("seconds", body.get("seconds", 5)))
                mode = query.get("mode", body.get("mode", "refuse"))
                threading.Thread(target=self.make_unavailable, args=(seconds, mode), daemon=True).start()
                return Response(202, {"unavailable_for": seconds, "mode": mode})
            if path == "/lab/fail-next":
                self.fail_next(int(query.get("n", body.get("n", 1))), int(query.get("status", body.get("status", 500))))
                return Response(200, {"ok": True})
            if path == "/lab/drop-watches":
                return Response(200, {"dropped": self.drop_watches()})
            if path == "/lab/compact":
                self.compact()
                return Response(200, {"ok": True})
            if path == "/lab/requests":
                return Response(200, {"requests": [r._asdict() for r in self.requests]})
            if path == "/lab/gpu/nodes":
                return Response(201, self.gpu.add_gpu_node(**body))
            if path == "/lab/gpu/operator-validator":
                return Response(201, self.gpu.install_operator_validator(**body))
            if path == "/lab/gpu/resource-slices":
                return Response(201, {"items": self.gpu.publish_resource_slices(**body)})
        except (TypeError, ValueError, ApiError) as exc:
            return Response(400, {"error": str(exc)})
        return Response(404, {"error": f"unknown lab endpoint {path}"})

    # --- in-process API (seeding and assertions; no faults, no request log) ---------------------

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
        headers = {"Content-Type": content_type, "User-Agent": "lab-seed/1.0"}
        response = self.server_api.handle(Request.build(method, path, query or {}, headers, data))
        if response.status >= 400:
            status = response.body
            raise ApiError(response.status, status.get("reason", ""), status.get("message", ""), status.get("details"))
        return response.body

    def _path(
        self, api_version: str, kind: str, name: str | None, namespace: str | None, sub: str | None = None
    ) -> str:
        rtype = self.server_api.type_for(api_version, kind)
        if rtype.namespaced and not namespace:
            namespace = "default"
        return self.server_api.path_for(rtype, namespace, name, sub)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        return self.call("POST", self._path(obj["apiVersion"], obj["kind"], None, meta.get("namespace")), obj)

    def apply(self, obj: dict[str, Any], field_manager: str = "lab", force: bool = True) -> dict[str, Any]:
        """Server-side apply (create or update) as ``field_manager``."""
        meta = obj.get("metadata") or {}
        path = self._path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        query = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return self.call("PATCH", path, obj, query, "application/apply-patch+yaml")

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return self.call("GET", self._path(api_version, kind, name, namespace))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        rtype = self.server_api.type_for(api_version, kind)
        query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        return self.call("GET", self.server_api.path_for(rtype, namespace), query=query)["items"]

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        content = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
        }[patch_type]
        return self.call("PATCH", self._path(api_version, kind, name, namespace, subresource), patch, None, content)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation_policy: str | None = None,
    ) -> bool:
        """Delete an object; False when it did not exist."""
        query = {"propagationPolicy": propagation_policy} if propagation_policy else None
        try:
            self.call("DELETE", self._path(api_version, kind, name, namespace), query=query)
        except ApiError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def set_status(
        self,
        api_version: str,
        kind: str,
        name: str,
        status: dict[str, Any],
        *,
        namespace: str | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        """Merge (or with ``replace`` set) the status of an object through its status subresource."""
        rtype = self.server_api.type_for(api_version, kind)
        sub = "status" if rtype.status else None
        if replace:
            current = self.get(api_version, kind, name, namespace) or {}
            current["status"] = status
            return self.call("PUT", self._path(api_version, kind, name, namespace, sub), current)
        return self.patch(api_version, kind, name, {"status": status}, namespace=namespace, subresource=sub)

    def hold(self, kind: str, name: str, namespace: str, seconds: float = float("inf")) -> None:
        """Keep an apps/v1 workload unready for ``seconds`` (scaled by delay_scale), then let it become ready."""
        plural = {"Deployment": "deployments", "DaemonSet": "daemonsets", "StatefulSet": "statefulsets"}[kind]
        until = float("inf") if seconds == float("inf") else time.monotonic() + seconds * self.delay_scale
        self.controllers.holds[(plural, namespace, name)] = until
        self.scheduler.schedule(0, lambda: self.controllers.reconcile_workload(plural, namespace, name))
        if seconds != float("inf"):
            self.scheduler.schedule(
                seconds * self.delay_scale + 0.01, lambda: self.controllers.reconcile_workload(plural, namespace, name)
            )

    def release(self, kind: str, name: str, namespace: str) -> None:
        plural = {"Deployment": "deployments", "DaemonSet": "daemonsets", "StatefulSet": "statefulsets"}[kind]
        self.scheduler.schedule(0, lambda: self.controllers.release(plural, namespace, name))


def main(argv: list[str] | None = None) -> int:
    parser = emulator_arguments("Kubernetes API emulator (metalplane lab)")
    parser.add_argument("--token", default=DEFAULT_TOKEN, help="bearer token clients must send")
    parser.add_argument("--gpu-nodes", type=int, default=0, help="seed this many GPU nodes (gpu-node-0, ...)")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--gpu-product", default="NVIDIA-L40S", help="product; see lab.kube.gpu.PRODUCTS")
    parser.add_argument("--dra", action="store_true", help="publish NVIDIA DRA ResourceSlices for the GPU nodes")
    parser.add_argument(
        "--operator-ready-after",
        type=float,
        default=None,
        help="install the nvidia-operator-validator DaemonSet, ready after this many seconds",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s kube-lab %(message)s")
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="kube-lab-"))
    emulator = KubeEmulator(args.delay_scale, args.token, "lab", state_dir=state_dir, host=args.host, port=args.port)
    staging = emulator.state_dir / KUBECONFIG_NAME
    staging.unlink(missing_ok=True)
    emulator.start()
    for index in range(args.gpu_nodes):
        node = f"gpu-node-{index}"
        emulator.gpu.add_gpu_node(node, gpus=args.gpus_per_node, product=args.gpu_product)
        if args.dra:
            emulator.gpu.publish_resource_slices(node, product=args.gpu_product, count=args.gpus_per_node)
    if args.operator_ready_after is not None:
        emulator.gpu.install_operator_validator(ready_after=args.operator_ready_after)
    LOG.info("serving %s, kubeconfig %s", emulator.url, emulator.kubeconfig_path)
    serve_until_signalled(emulator.stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
