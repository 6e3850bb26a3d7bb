"""A stateful emulator of the Vultr API v2 (VKE, plans, regions) on loopback, for the VKE modules' tests.

Why: the modules must be idempotent, wait for ``pending`` -> ``active``, survive 429/5xx and lost
responses, and never create duplicates. None of that can be tested against a stateless mock (Prism)
or the paid live API. This emulator keeps clusters, node pools, nodes, labels and taints in memory,
moves them to ``active`` after configurable delays, injects faults per endpoint, logs every request
(for the benchmark) and can check every exchange against Vultr's OpenAPI overlay
(``lab.vultr.contract``). Behaviour and its sources: ``docs/lab/vultr.md``.

In-process (tests)::

    from lab.vultr.server import VultrEmulator
    with VultrEmulator(delay_scale=0.0, contract=True) as emu:
        emu.base_url              # http://127.0.0.1:PORT/v2
        emu.inject(method="POST", path=r"/kubernetes/clusters$", fault="lost_response")

Out of process (labctl): ``python -m lab.vultr.server --host 127.0.0.1 --port N [--delay-scale F]
[--state-dir DIR] [--api-key K] [--gpu-plans a,b] [--vpc-only-works | --vpc-only-partial] [--seed S]
[--workload-clusters [--validator-ready-after S]] [--contract [SPEC]]``; control it through ``/lab/faults``,
``/lab/requests`` and ``/lab/contract`` (loopback only, no auth). ``--workload-clusters`` (``twin=True``)
runs a workload Kubernetes API per cluster (``lab.vultr.twin``, ``docs/lab/twin.md``). ``--contract``
checks every exchange against the overlay spec exactly as the in-process tests do: each violation is
one ``CONTRACT VIOLATION: <method> <path>: <reason>`` line on stderr and is kept in
``<state-dir>/vultr-contract.json`` (what ``labctl status``/``down`` report).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
import ssl
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from lab.common.emulator import LOOPBACK, emulator_arguments, serve_until_signalled
from lab.vultr.contract import CONTRACT_REPORT, OVERLAY, VIOLATION_PREFIX, Exchange, VultrContract
from lab.vultr.faults import UNDOCUMENTED_FIELD, Fault, FaultInjector, RequestLog
from lab.vultr.state import ApiError, Delays, VkeState, bad_request

DEFAULT_API_KEY = "lab-vultr-api-key"
API_PREFIX = "/v2"
JSON = "application/json"  # exactly: vultr-python 0.2.0's ``_req`` parses a body only for this exact value

# Vultr API docs (https://www.vultr.com/api/): per_page defaults to 100, at most 500.
PER_PAGE_DEFAULT = 100
PER_PAGE_MAX = 500

# [unverified] the text of Vultr's 401 body; the shape {"error", "status"} is the documented one.
MSG_UNAUTHORIZED = "Invalid API token."
MSG_SERVER_ERROR = "Internal server error."

# How often the ticker thread advances time when nobody polls (lifecycle hooks stay timely).
TICK_SECONDS = 0.25


ClusterHook = Callable[[dict[str, Any]], None]
ViolationHook = Callable[[dict[str, Any]], None]
KubeconfigFactory = Callable[[dict[str, Any]], str]


def default_kubeconfig(cluster: dict[str, Any]) -> str:
    """A valid kubeconfig that points nowhere on purpose (port 1), until issue 6 plugs real APIs in."""
    name = f"vke-{cluster['id']}"
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: {name}\n"
        "  cluster:\n"
        "    server: https://127.0.0.1:1\n"
        "    insecure-skip-tls-verify: true\n"
        "contexts:\n"
        f"- name: {name}\n"
        "  context:\n"
        f"    cluster: {name}\n"
        f"    user: admin-{cluster['id']}\n"
        f"current-context: {name}\n"
        "preferences: {}\n"
        "users:\n"
        f"- name: admin-{cluster['id']}\n"
        "  user:\n"
        f"    token: lab-vke-token-{cluster['id']}\n"
    )


@dataclass
class Reply:
    status: int
    body: Any = None  # JSON-serialisable, or None for an empty body
    headers: dict[str, str] | None = None
    lost: bool = False  # close the connection without answering


# --------------------------------------------------------------------------------------------------
# Routing: (method, regex below /v2, handler name, needs auth). /plans, /regions and
# /kubernetes/versions are ``security: []`` in the spec.

_ID = r"([^/]+)"
_C = rf"/kubernetes/clusters/{_ID}"
_P = rf"{_C}/node-pools/{_ID}"
ROUTES: tuple[tuple[str, str, str, bool], ...] = (
    ("GET", r"/kubernetes/versions", "versions", False),
    ("GET", r"/plans", "plans", False),
    ("GET", r"/regions", "regions", False),
    ("GET", rf"/regions/{_ID}/availability", "availability", False),
    ("POST", r"/kubernetes/clusters", "create_cluster", True),
    ("GET", r"/kubernetes/clusters", "list_clusters", True),
    ("GET", _C, "get_cluster", True),
    ("PUT", _C, "update_cluster", True),
    ("DELETE", _C, "delete_cluster", True),
    ("DELETE", rf"{_C}/delete-with-linked-resources", "delete_cluster_linked", True),
    ("GET", rf"{_C}/resources", "resources", True),
    ("GET", rf"{_C}/config", "config", True),
    ("GET", rf"{_C}/available-upgrades", "available_upgrades", True),
    ("POST", rf"{_C}/upgrades", "upgrade", True),
    ("POST", rf"{_C}/node-pools", "create_pool", True),
    ("GET", rf"{_C}/node-pools", "list_pools", True),
    ("GET", _P, "get_pool", True),
    ("PATCH", _P, "update_pool", True),
    ("DELETE", _P, "delete_pool", True),
    ("GET", rf"{_P}/nodes", "list_nodes", True),
    ("DELETE", rf"{_P}/nodes/{_ID}", "delete_node", True),
    ("POST", rf"{_P}/nodes/{_ID}/recycle", "recycle_node", True),
    ("GET", rf"{_P}/labels", "list_labels", True),
    ("POST", rf"{_P}/labels", "add_label", True),
    ("GET", rf"{_P}/labels/{_ID}", "get_label", True),
    ("DELETE", rf"{_P}/labels/{_ID}", "delete_label", True),
    ("GET", rf"{_P}/taints", "list_taints", True),
    ("POST", rf"{_P}/taints", "add_taint", True),
    ("GET", rf"{_P}/taints/{_ID}", "get_taint", True),
    ("DELETE", rf"{_P}/taints/{_ID}", "delete_taint", True),
)
_COMPILED = tuple((m, re.compile(f"^{rx}$"), name, auth) for m, rx, name, auth in ROUTES)


def _cursor(kind: str, offset: int) -> str:
    return base64.b64encode(f"{kind}__{offset}".encode()).decode()


def _offset(cursor: str) -> int:
    try:
        kind, _unused, number = base64.b64decode(cursor, validate=True).decode().partition("__")
        offset = int(number)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad_request("Invalid cursor.") from None
    if kind not in ("next", "prev") or offset < 0:
        raise bad_request("Invalid cursor.")
    return offset


def paginate(items: list[Any], query: dict[str, str], key: str) -> dict[str, Any]:
    """Cursor pagination as Vultr does it: follow ``meta.links.next`` until it is ``""``."""
    try:
        per_page = int(query.get("per_page") or PER_PAGE_DEFAULT)
    except ValueError:
        raise bad_request() from None
    if per_page < 1:
        raise bad_request()
    per_page = min(per_page, PER_PAGE_MAX)
    offset = _offset(query["cursor"]) if query.get("cursor") else 0
    end = offset + per_page
    links = {
        "next": _cursor("next", end) if end < len(items) else "",
        "prev": _cursor("prev", max(0, offset - per_page)) if offset > 0 else "",
    }
    return {key: items[offset:end], "meta": {"total": len(items), "links": links}}


# --------------------------------------------------------------------------------------------------


class VultrEmulator:
    """The emulator: state + HTTP server + faults + request log + optional contract check."""

    def __init__(
        self,
        delay_scale: float = 0.0,
        api_key: str = DEFAULT_API_KEY,
        gpu_plans: Iterable[str] | None = None,
        contract: VultrContract | bool | str | Path | None = None,
        seed: int = 0,
        *,
        vpc_only_fails: bool = True,
        vpc_only_partial: bool = False,
        versions: Iterable[str] | None = None,
        delays: Delays | None = None,
        kubeconfig_factory: KubeconfigFactory | None = None,
        on_cluster_active: ClusterHook | None = None,
        on_cluster_deleted: ClusterHook | None = None,
        twin: bool = False,
        validator_ready_after: float | None = 60.0,
        workload_state_dir: Path | None = None,
        tls_dir: Path | None = None,
    ) -> None:
        self.api_key = api_key
        # HTTPS with a CA of its own (written to tls_dir), for the tests of the client's certificate verification;
        # the real API's certificate chains to a public CA, so the lab serves plain HTTP otherwise.
        self.tls_dir = tls_dir
        self.ca_path: Path | None = None
        self.state = VkeState(
            delay_scale=delay_scale,
            delays=delays,
            gpu_plans=gpu_plans,
            versions=versions,
            vpc_only_fails=vpc_only_fails,
            vpc_only_partial=vpc_only_partial,
            seed=seed,
        )
        if contract is True:
            self.contract: VultrContract | None = VultrContract()
        elif contract is None or contract is False:
            self.contract = None
        elif isinstance(contract, VultrContract):
            self.contract = contract
        else:
            self.contract = VultrContract(contract)
        self.faults = FaultInjector(seed)
        self.log = RequestLog()
        self.kubeconfig_factory: KubeconfigFactory = kubeconfig_factory or default_kubeconfig
        self.on_cluster_active = on_cluster_active
        self.on_cluster_deleted = on_cluster_deleted
        self.contract_violations: list[str] = []
        # The same violations, structured: {method, path, status, fault, reason} (for /lab/contract).
        self.contract_findings: list[dict[str, Any]] = []
        self.contract_checked = 0  # exchanges checked against the contract
        # Called with each finding as it is recorded (out of process: stderr and the report file).
        self.on_contract_violation: ViolationHook | None = None
        # Explicit exemptions: (reason, what was exempted). Never silent: tests can read them.
        self.contract_exempted: list[tuple[str, str]] = []
        self.internal_errors: list[str] = []
        self._expecting: list[str] = []
        self._record_lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        # Issue 6: a workload Kubernetes API per active cluster (lab.vultr.twin), off by default.
        self.twin: Any = None
        if twin:
            from lab.vultr.twin import VkeTwin

            self.twin = VkeTwin(self, validator_ready_after=validator_ready_after, state_dir=workload_state_dir)

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self, host: str = LOOPBACK, port: int = 0) -> VultrEmulator:
        """Listen on host:port (0: a free port chosen by the kernel) and serve in threads."""
        server = _Server((host, port), _Handler)
        server.emu = self
        if self.tls_dir is not None:
            server.socket = self._tls_context(host).wrap_socket(server.socket, server_side=True)
        self._server = server
        self._stop.clear()
        self._threads = [
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True),
            threading.Thread(target=self._tick, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        if self.twin is not None:
            self.twin.attach()
        return self

    def _tls_context(self, host: str) -> ssl.SSLContext:
        from lab.common.tls import issue_server_certificate

        assert self.tls_dir is not None
        material = issue_server_certificate("vultr-lab-ca", ["localhost", host])
        self.tls_dir.mkdir(parents=True, exist_ok=True)
        self.ca_path = self.tls_dir / "vultr-ca.crt"
        chain, key = self.tls_dir / "vultr-api.crt", self.tls_dir / "vultr-api.key"
        self.ca_path.write_bytes(material.ca_pem)
        chain.write_bytes(material.cert_pem + material.ca_pem)
        key.write_bytes(material.key_pem)
        key.chmod(0o600)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain, key)
        return context

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []
        if self.twin is not None:
            self.twin.stop()

    def __enter__(self) -> VultrEmulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        assert self._server is not None, "the emulator is not started"
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        assert self._server is not None, "the emulator is not started"
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        """What the modules' ``api_endpoint`` takes (the client appends /v2)."""
        return f"{'https' if self.tls_dir is not None else 'http'}://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.endpoint + API_PREFIX

    # ---- test-facing API ------------------------------------------------------------------------

    def inject(
        self,
        fault: str,
        *,
        method: str | None = None,
        path: str = ".*",
        count: int | None = None,
        probability: float | None = None,
        retry_after: int | None = 1,
        latency: float = 0.5,
    ) -> Fault:
        """Misbehave on matching requests; ``count`` None means 1, or unlimited with a probability."""
        return self.faults.add(Fault(fault, method, path, count, probability, retry_after=retry_after, latency=latency))

    def clear_faults(self) -> None:
        self.faults.clear()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.log.snapshot()

    @property
    def counters(self) -> dict[str, int]:
        return dict(self.log.counters)

    def request_count(self, method: str | None = None, path: str | None = None) -> int:
        """Requests seen, optionally filtered by method and a regex searched in the path."""
        return sum(
            1
            for r in self.log.snapshot()
            if (method is None or r["method"] == method) and (path is None or re.search(path, r["path"]))
        )

    @property
    def clusters(self) -> dict[str, dict[str, Any]]:
        """Current clusters as the API renders them, by id (clusters being deleted included)."""
        self._advance()
        return {c["id"]: c for c in self.state.list_clusters()}

    @property
    def deleted_clusters(self) -> list[tuple[str, bool]]:
        """Completed deletions: (cluster id, whether linked resources were deleted too)."""
        return list(self.state.deleted)

    @contextlib.contextmanager
    def expect_violations(self, reason: str) -> Iterator[None]:
        """Exempt the contract violations of requests that are invalid on purpose, and insist on one.

        Violations recorded inside the block go to ``contract_exempted`` with ``reason``; if the
        contract is on and none happened, the block fails, so an exemption can never hide a bug.
        """
        start = len(self.contract_exempted)
        self._expecting.append(reason)
        try:
            yield
        finally:
            self._expecting.remove(reason)
        if self.contract is not None and not any(r == reason for r, _unused in self.contract_exempted[start:]):
            raise AssertionError(f"expected a contract violation ({reason}), none was recorded")

    # ---- time and hooks -------------------------------------------------------------------------

    def _tick(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._advance()

    def _advance(self) -> None:
        for event, cluster in self.state.advance():
            hook = self.on_cluster_active if event == "active" else self.on_cluster_deleted
            if hook is None:
                continue
            try:
                hook(cluster)
            except Exception:  # a broken hook must show up in the test, not kill the server
                self.internal_errors.append(f"on_cluster_{event} hook: {traceback.format_exc()}")

    # ---- request handling -----------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: list[tuple[str, str]], headers: dict[str, str], body: bytes
    ) -> Reply:
        """Answer one /v2 request, log it and check it against the contract."""
        self._advance()
        below = path[len(API_PREFIX) :]
        fault = self.faults.pick(method, below)
        reply: Reply
        if fault is not None and fault.fault in ("429", "500", "503"):
            reply = self._fault_reply(fault)
        else:
            if fault is not None and fault.fault == "latency":
                self._stop.wait(fault.latency)
            reply = self._dispatch(method, below, dict(query), headers, body)
            if fault is not None and fault.fault == "lost_response":
                reply = Reply(reply.status, reply.body, reply.headers, lost=True)
            elif fault is not None and fault.fault == "500_applied":
                reply = Reply(500, {"error": MSG_SERVER_ERROR, "status": 500})
            elif fault is not None and fault.fault == "undocumented_field":
                body = reply.body if isinstance(reply.body, dict) else {}
                reply = Reply(reply.status, {**body, UNDOCUMENTED_FIELD: True}, reply.headers)
        content = b"" if reply.body is None else json.dumps(reply.body).encode()
        response_headers = dict(reply.headers or {})
        if content:
            response_headers["Content-Type"] = JSON
        self.log.record(method, path, dict(query), None if reply.lost else reply.status, fault.fault if fault else None)
        if self.contract is not None:
            exchange = Exchange(
                method=method,
                path=path,
                query=query,
                headers=headers,
                body=body,
                content_type=headers.get("Content-Type", ""),
                status=None if reply.lost else reply.status,
                response_headers=response_headers,
                response_body=content,
                fault=fault.fault if fault else None,
            )
            try:
                violations, notes = self.contract.check(exchange)
            except Exception as error:  # e.g. openapi-core failing on a non-UTF-8 body: still a finding
                violations, notes = [f"{VultrContract.label(exchange)}: the contract check failed: {error!r}"], []
            self._record(exchange, violations, notes)
        reply.headers = response_headers
        reply.body = content
        return reply

    def _record(self, exchange: Exchange, violations: list[str], notes: list[str]) -> None:
        prefix = VultrContract.label(exchange) + ": "
        findings = [
            {
                "method": exchange.method,
                "path": exchange.path,
                "status": exchange.status,
                "fault": exchange.fault,
                "reason": violation[len(prefix) :] if violation.startswith(prefix) else violation,
            }
            for violation in violations
        ]
        with self._record_lock:
            self.contract_checked += 1
            self.contract_exempted += [("injected fault", n) for n in notes]
            if self._expecting:
                self.contract_exempted += [(self._expecting[-1], v) for v in violations]
                return
            self.contract_violations += violations
            self.contract_findings += findings
        hook = self.on_contract_violation
        for finding in findings:  # outside the lock: the hook reads contract_report()
            if hook is not None:
                hook(finding)

    def contract_report(self) -> dict[str, Any]:
        """What ``GET /lab/contract`` answers: whether the contract is checked, how often, what failed."""
        with self._record_lock:
            return {
                "enabled": self.contract is not None,
                "spec": str(self.contract.spec_path) if self.contract is not None else None,
                "checked": self.contract_checked,
                "violations": [dict(f) for f in self.contract_findings],
                "exempted": len(self.contract_exempted),
            }

    @staticmethod
    def _fault_reply(fault: Fault) -> Reply:
        status = int(fault.fault)
        messages = {429: "Rate limit reached - please try your request again later.", 500: MSG_SERVER_ERROR}
        message = messages.get(status, "Service Unavailable")
        headers = {}
        if fault.retry_after is not None and status in (429, 503):
            headers["Retry-After"] = str(fault.retry_after)
        return Reply(status, {"error": message, "status": status}, headers)

    def _dispatch(self, method: str, below: str, query: dict[str, str], headers: dict[str, str], body: bytes) -> Reply:
        route = None
        path_known = False
        for route_method, regex, name, auth in _COMPILED:
            match = regex.match(below)
            if match:
                path_known = True
                if route_method == method:
                    route = (name, auth, match.groups())
                    break
        try:
            if route is None:
                if path_known:
                    return Reply(405, {"error": "Method not allowed.", "status": 405})
                raise ApiError(404, "Not found.")
            name, auth, args = route
            if auth and headers.get("Authorization") != f"Bearer {self.api_key}":
                raise ApiError(401, MSG_UNAUTHORIZED)
            payload: dict[str, Any] = {}
            if body:
                # The API rejects a body without Content-Type: application/json with a 400
                # (vultr/ansible-collection-vultr PR #187).
                ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
                if ctype != JSON:
                    raise bad_request()
                try:
                    payload = json.loads(body)
                except (ValueError, UnicodeDecodeError):
                    raise bad_request() from None
                if not isinstance(payload, dict):
                    raise bad_request()
            handler: Callable[..., Reply] = getattr(self, f"_api_{name}")
            return handler(*args, query=query, payload=payload)
        except ApiError as error:
            return Reply(error.status, error.body)
        except Exception:
            self.internal_errors.append(f"{method} {below}: {traceback.format_exc()}")
            return Reply(500, {"error": MSG_SERVER_ERROR, "status": 500})

    # ---- endpoint handlers (names follow ROUTES) --------------------------------------------------

    def _api_versions(self, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"versions": list(self.state.versions)})

    def _api_plans(self, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, paginate(self.state.list_plans(query.get("type")), query, "plans"))

    def _api_regions(self, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, paginate(self.state.list_regions(), query, "regions"))

    def _api_availability(self, region: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"available_plans": self.state.availability(region, query.get("type"))})

    def _api_create_cluster(self, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(201, {"vke_cluster": self.state.create_cluster(payload)})

    def _api_list_clusters(self, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, paginate(self.state.list_clusters(), query, "vke_clusters"))

    def _api_get_cluster(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"vke_cluster": self.state.get_cluster(vke)})

    def _api_update_cluster(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        self.state.update_cluster(vke, payload)
        return Reply(204)

    def _api_delete_cluster(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        self.state.delete_cluster(vke, linked=False)
        return Reply(204)

    def _api_delete_cluster_linked(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        self.state.delete_cluster(vke, linked=True)
        return Reply(204)

    def _api_resources(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"resources": self.state.resources(vke)})

    def _api_config(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"kube_config": self.state.kube_config(vke, self.kubeconfig_factory)})

    def _api_available_upgrades(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"available_upgrades": self.state.available_upgrades(vke)})

    def _api_upgrade(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        self.state.start_upgrade(vke, payload)
        return Reply(202)

    def _api_create_pool(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(201, {"node_pool": self.state.create_pool(vke, payload)})

    def _api_list_pools(self, vke: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, paginate(self.state.list_pools(vke), query, "node_pools"))

    def _api_get_pool(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"node_pool": self.state.get_pool(vke, pool)})

    def _api_update_pool(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(202, {"node_pool": self.state.update_pool(vke, pool, payload)})

    def _api_delete_pool(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        self.state.delete_pool(vke, pool)
        return Reply(204)

    def _api_list_nodes(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, paginate(self.state.list_nodes(vke, pool), query, "worker_nodes"))

    def _api_delete_node(
        self, vke: str, pool: str, node: str, *, query: dict[str, str], payload: dict[str, Any]
    ) -> Reply:
        self.state.delete_node(vke, pool, node)
        return Reply(204)

    def _api_recycle_node(
        self, vke: str, pool: str, node: str, *, query: dict[str, str], payload: dict[str, Any]
    ) -> Reply:
        self.state.recycle_node(vke, pool, node)
        return Reply(204)

    def _api_list_labels(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"labels": self.state.list_labels(vke, pool)})

    def _api_add_label(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(201, {"label": self.state.add_label(vke, pool, payload)})

    def _api_get_label(
        self, vke: str, pool: str, label: str, *, query: dict[str, str], payload: dict[str, Any]
    ) -> Reply:
        return Reply(200, {"label": self.state.get_label(vke, pool, label)})

    def _api_delete_label(
        self, vke: str, pool: str, label: str, *, query: dict[str, str], payload: dict[str, Any]
    ) -> Reply:
        self.state.delete_label(vke, pool, label)
        return Reply(204)

    def _api_list_taints(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(200, {"taints": self.state.list_taints(vke, pool)})

    def _api_add_taint(self, vke: str, pool: str, *, query: dict[str, str], payload: dict[str, Any]) -> Reply:
        return Reply(201, {"taint": self.state.add_taint(vke, pool, payload)})

    def _api_get_taint(
        self, vke: str, pool: str, taint: str, *, query: dict[str, str], payload: dict[str, Any]
    ) -> Reply:
        return Reply(200, {"taint": self.state.get_taint(vke, pool, taint)})

    def _api_delete_taint(
        self, vke: str, pool: str, taint: str, *, query: dict[str, str], payload: dict[str, Any]
    ) -> Reply:
        self.state.delete_taint(vke, pool, taint)
        return Reply(204)

    # ---- out-of-process control (/lab/*) ----------------------------------------------------------

    def control(self, method: str, path: str, body: bytes) -> Reply:
        handler = {
            ("POST", "/lab/faults"): self._control_add_fault,
            ("GET", "/lab/faults"): lambda _b: Reply(200, {"faults": [f.describe() for f in self.faults.active()]}),
            ("DELETE", "/lab/faults"): lambda _b: (self.clear_faults(), Reply(204))[1],
            ("GET", "/lab/requests"): lambda _b: Reply(200, {"requests": self.requests, "counters": self.counters}),
            ("DELETE", "/lab/requests"): lambda _b: (self.log.clear(), Reply(204))[1],
            ("GET", "/lab/contract"): lambda _b: Reply(200, self.contract_report()),
            ("GET", "/lab/state"): lambda _b: Reply(
                200, {"clusters": list(self.clusters.values()), "deleted": self.deleted_clusters}
            ),
        }.get((method, path))
        if handler is None:
            return Reply(404, {"error": "Not found.", "status": 404})
        return handler(body)

    def _control_add_fault(self, body: bytes) -> Reply:
        allowed = {"method", "path", "fault", "count", "probability", "retry_after", "latency"}
        try:
            spec = json.loads(body or b"{}")
            if not isinstance(spec, dict) or not set(spec) <= allowed or "fault" not in spec:
                raise ValueError(f"expected a JSON object with 'fault' and only {sorted(allowed)}")
            fault = self.inject(**spec)
        except (ValueError, TypeError, re.error) as error:
            return Reply(400, {"error": str(error), "status": 400})
        return Reply(201, {"fault": fault.describe()})


# --------------------------------------------------------------------------------------------------
# HTTP plumbing


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    emu: VultrEmulator


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients expect; every answer has a Content-Length
    # TCP_NODELAY: the headers and the body are two writes, and with Nagle's algorithm the body waits for the client's
    # delayed ACK of the headers (40 ms on Linux), a delay no real API adds (tests/lab/kube/server.py).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the request log is in ``VultrEmulator.requests``."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        emu = self.server.emu
        split = urlsplit(self.path)
        path = split.path
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            self.close_connection = True  # chunked bodies are not supported; do not reuse the stream
        if path == "/lab" or path.startswith("/lab/"):
            if self.client_address[0] not in ("127.0.0.1", "::1"):
                self._send(Reply(403, json.dumps({"error": "Forbidden.", "status": 403}).encode(), {}))
                return
            reply = emu.control(method, path, body)
            content = b"" if reply.body is None else json.dumps(reply.body).encode()
            self._send(Reply(reply.status, content, {"Content-Type": JSON} if content else {}))
            return
        if path != API_PREFIX and not path.startswith(API_PREFIX + "/"):
            self._send(Reply(404, json.dumps({"error": "Not found.", "status": 404}).encode(), {"Content-Type": JSON}))
            return
        headers = {k.title(): v for k, v in self.headers.items()}  # canonical names, e.g. Content-Type
        query = parse_qsl(split.query, keep_blank_values=True)
        reply = emu.handle(method, path, query, headers, body)
        if reply.lost:
            self.close_connection = True  # the request took effect; the client never hears back
            return
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        content: bytes = reply.body or b""
        try:
            self.send_response(reply.status)
            for key, value in (reply.headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            if content:
                self.wfile.write(content)
        except OSError:
            self.close_connection = True  # the client went away (e.g. a timeout during latency)


# --------------------------------------------------------------------------------------------------
# CLI


class ContractReport:
    """Out of process (``--contract``): each violation on stderr at once, and the report file kept current.

    The file is rewritten (atomically) on every violation, so a process killed before its shutdown
    still leaves every violation it saw; the shutdown writes the final count of checked exchanges.
    """

    def __init__(self, emu: VultrEmulator, path: Path | None) -> None:
        self.emu = emu
        self.path = path
        self._lock = threading.Lock()

    def violation(self, finding: dict[str, Any]) -> None:
        reason = " ".join(str(finding["reason"]).split())  # one line, whatever the validator's message
        print(f"{VIOLATION_PREFIX} {finding['method']} {finding['path']}: {reason}", file=sys.stderr, flush=True)
        self.write()

    def write(self) -> None:
        if self.path is None:
            return
        with self._lock:
            report = self.emu.contract_report()  # read under the lock: a later write never loses to an earlier one
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(report, indent=1), encoding="utf-8")
            tmp.replace(self.path)


def main(argv: list[str] | None = None) -> int:
    parser = emulator_arguments("Stateful Vultr API v2 (VKE) emulator for the metalplane lab")
    parser.add_argument("--api-key", default=DEFAULT_API_KEY, help="the Bearer token accepted (default %(default)s)")
    parser.add_argument("--gpu-plans", default=None, help="comma-separated vcg-* plans VKE accepts")
    parser.add_argument(
        "--vpc-only-works", action="store_true", help="accept vpc_only node pools instead of failing with HTTP 500"
    )
    parser.add_argument(
        "--vpc-only-partial",
        action="store_true",
        help="a failing vpc_only create leaves the cluster or pool behind, then answers 500 (a partial create)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for ids and probabilistic faults")
    parser.add_argument(
        "--workload-clusters",
        action="store_true",
        help="run a workload Kubernetes API per active cluster (its kubeconfig is what /config returns)",
    )
    parser.add_argument(
        "--validator-ready-after",
        type=float,
        default=60.0,
        help="seconds (times --delay-scale) until a workload cluster's GPU operator validator is ready",
    )
    parser.add_argument(
        "--contract",
        nargs="?",
        type=Path,
        const=OVERLAY,
        default=None,
        metavar="SPEC",
        help="check every exchange against the Vultr overlay spec (default SPEC: %(const)s); report each violation "
        f"on stderr and in <state-dir>/{CONTRACT_REPORT}",
    )
    args = parser.parse_args(argv)
    if args.contract is not None and not args.contract.is_file():
        parser.error(f"--contract: the Vultr overlay spec {args.contract} does not exist")
    gpu_plans = [p.strip() for p in args.gpu_plans.split(",") if p.strip()] if args.gpu_plans is not None else None
    emu = VultrEmulator(
        delay_scale=args.delay_scale,
        api_key=args.api_key,
        gpu_plans=gpu_plans,
        seed=args.seed,
        vpc_only_fails=not args.vpc_only_works,
        vpc_only_partial=args.vpc_only_partial,
        twin=args.workload_clusters,
        validator_ready_after=args.validator_ready_after,
        # The workload APIs' kubeconfigs and TLS keys live with the rest of the lab state, not in /tmp.
        workload_state_dir=args.state_dir / "workloads" if args.state_dir is not None else None,
        contract=args.contract,
    )
    state_dir: Path | None = args.state_dir
    if emu.contract is not None:
        report = ContractReport(emu, state_dir / CONTRACT_REPORT if state_dir is not None else None)
        emu.on_contract_violation = report.violation
        report.write()  # before listening: once the port answers, the report says the contract is checked
    emu.start(host=args.host, port=args.port)

    def shutdown() -> None:
        emu.stop()
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
            log = {"requests": emu.requests, "counters": emu.counters}
            (state_dir / "vultr-requests.json").write_text(json.dumps(log, indent=1), encoding="utf-8")
        if emu.contract is not None:
            report.write()

    serve_until_signalled(shutdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
