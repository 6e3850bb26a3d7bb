"""Serving on the lab's Modelplane control plane: the gateway, the scheduler, and OpenAI-compatible stand-ins.

Why: an adoption is only proven when a chat completion sent to Modelplane's public URL
(``http://<InferenceGateway address>/<namespace>/<service>/v1/chat/completions``) is answered by the
cluster. Real Modelplane needs Traefik, Envoy, Crossplane and a GPU; the lab simulates what each does,
from the same objects (Modelplane v0.3.1, https://github.com/modelplaneai/modelplane at ``90ba117d``:
the XRDs of InferenceGateway, ModelDeployment, ModelReplica, ModelService, ModelCache):

* **InferenceGateway** ``default`` (compose-inference-gateway): Ready with ``status.address`` = the
  loopback address of the *front door*, an HTTP server standing in for Traefik. Another name never gets
  Ready (compose-model-service matches only ``default``).
* **Scheduler** (compose-model-deployment): a ModelDeployment's replicas go to InferenceClusters that
  are Ready **and** have ``status.gateway.address`` (the rule the XRD and the docs state), match its
  ``clusterSelector.matchLabels``, carry no taint it does not tolerate, are not being deleted, and have a
  pool whose class (``status.gpuPools[].devices``) satisfies every member's device request: a DRA device
  whose ``count`` covers the request and whose driver, attributes and capacity satisfy every CEL
  selector. One replica per cluster, clusters by name. The CEL forms understood are
  ``device.driver == "x"``, ``device.attributes["d"].name == "v"`` (or ``!=``) and
  ``device.capacity["d"].name.compareTo(quantity("q")) <op> 0``, joined by ``&&``; any other selector
  is **not evaluated** (counted as satisfied). A replica is a ModelReplica named ``<deployment>-<5
  hex>`` with the labels ``modelplane.ai/deployment`` and ``modelplane.ai/cluster``; it turns Ready
  ``replica_ready_after`` seconds (x delay scale) after it was placed, while its cluster stays Ready
  (and, with a ``modelCacheRef``, once the cache is Ready there). Replicas of a deleted deployment, or
  on a cluster that is gone, are deleted.
* **ModelCache**: matched to the clusters its ``clusterSelector`` selects that have a cache
  StorageClass (``status.cache.storageClassName``); phase ``Ready`` there at once (nothing is downloaded).
* **ModelService**: ``status.address`` = ``http://<gateway>/<namespace>/<name>``; ``EndpointsResolved``
  when its selectors match a replica, ``RoutingReady``/``Ready`` when one of those is Ready and the gateway is.
* **Workload gateway stand-in**: every Ready InferenceCluster gets its own loopback HTTP server (the
  Envoy gateway Modelplane installs in the workload cluster); its address is the cluster's
  ``status.gateway.address``. It answers ``POST /<namespace>/<replica>/v1/chat/completions`` for a
  Ready replica placed on *that* cluster with a **deterministic completion** (OpenAI's
  ``chat.completion`` shape, naming the cluster and the replica, at most ``max_tokens`` words) and
  **records the request** (``ModelplaneEmulator.requests``, ``GET /lab/requests`` on the front door).
  It is a stand-in, not an engine: no model is loaded, nothing is generated. A request naming another
  model than the replica's ``--served-model-name`` gets vLLM's 404.

The front door routes ``/<namespace>/<service>/v1/...`` to one Ready replica its ModelService selects
and forwards the request to that replica's cluster gateway at ``/<namespace>/<replica>/v1/...``, as a
ModelEndpoint's ``rewritePath`` does: Traefik's ``404 page not found`` without a service, ``no
available server`` (503) without a Ready replica, 502 when the cluster gateway does not answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
import urllib.error
import urllib.request
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lab.common.emulator import LOOPBACK
from lab.kube.api import ApiError
from lab.kube.server import KubeEmulator

Obj = dict[str, Any]
API_VERSION = "modelplane.ai/v1alpha1"
GATEWAY_NAME = "default"
DEPLOYMENT_LABEL = "modelplane.ai/deployment"
CLUSTER_LABEL = "modelplane.ai/cluster"
DRA = "DRA"
# Bodies the real proxies answer with, so a client's error handling sees what it would see.
TRAEFIK_NOT_FOUND = "404 page not found\n"
TRAEFIK_NO_SERVER = "no available server\n"
ENVOY_NO_UPSTREAM = "no healthy upstream"
FORWARD_TIMEOUT = 10.0

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
}
_CEL_DRIVER = re.compile(r'^device\.driver\s*(==|!=)\s*"([^"]*)"$')
_CEL_ATTRIBUTE = re.compile(r'^device\.attributes\["([^"]+)"\]\.(\w+)\s*(==|!=)\s*"([^"]*)"$')
_CEL_CAPACITY = re.compile(
    r'^device\.capacity\["([^"]+)"\]\.(\w+)\.compareTo\(quantity\("([^"]+)"\)\)\s*(>=|<=|>|<|==|!=)\s*0$'
)


def now_text() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def quantity(text: str) -> Decimal:
    match = _QUANTITY.match(text.strip())
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {text!r}")
    return Decimal(match.group(1)) * _SUFFIX[match.group(2)]


def _compare(left: Decimal, op: str, right: Decimal) -> bool:
    return {
        ">=": left >= right,
        "<=": left <= right,
        ">": left > right,
        "<": left < right,
        "==": left == right,
        "!=": left != right,
    }[op]


def cel_matches(expression: str, device: Obj) -> bool:
    """The lab's reading of a DRA CEL selector against a class device (see the module docstring)."""
    driver = str(device.get("driver") or "")
    for part in (p.strip() for p in expression.split("&&")):
        if not part:
            continue
        if m := _CEL_DRIVER.match(part):
            if (driver == m.group(2)) != (m.group(1) == "=="):
                return False
        elif m := _CEL_ATTRIBUTE.match(part):
            domain, name, op, value = m.groups()
            attribute = (device.get("attributes") or {}).get(name) or {}
            have = next((attribute[k] for k in ("string", "version", "int", "bool") if k in attribute), None)
            equal = domain == driver and have is not None and str(have) == value
            if equal != (op == "=="):
                return False
        elif m := _CEL_CAPACITY.match(part):
            domain, name, wanted, op = m.groups()
            have = ((device.get("capacity") or {}).get(name) or {}).get("value")
            if domain != driver or have is None:
                return False
            try:
                if not _compare(quantity(str(have)), op, quantity(wanted)):
                    return False
            except ValueError:
                return False
        # anything else: not evaluated (documented)
    return True


def request_matches(request: Obj, devices: list[Obj]) -> Obj | None:
    """The class device that serves a member's device request, if any."""
    count = int(request.get("count", 1))
    for device in devices:
        if device.get("claim", DRA) != DRA or int(device.get("count", 1)) < count:
            continue
        if all(cel_matches(str(s.get("cel") or ""), device) for s in request.get("selectors") or []):
            return device
    return None


def _conditions(obj: Obj | None) -> dict[str, Obj]:
    return {c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def is_true(obj: Obj | None, kind: str) -> bool:
    return (_conditions(obj).get(kind) or {}).get("status") == "True"


def cluster_serving(cluster: Obj) -> bool:
    """Modelplane's scheduling gate: Ready and a gateway address (and not being deleted)."""
    return (
        is_true(cluster, "Ready")
        and bool(((cluster.get("status") or {}).get("gateway") or {}).get("address"))
        and not cluster["metadata"].get("deletionTimestamp")
    )


def tolerated(taint: Obj, tolerations: list[Obj]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator", "Equal") == "Exists" and (not tol.get("key") or tol.get("key") == taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def placement(cluster: Obj, template: Obj) -> tuple[str | None, str]:
    """(pool name, "") where ``template`` (a ModelDeployment's ``template.spec``) can run on ``cluster``, or
    (None, why not)."""
    name = cluster["metadata"]["name"]
    if not cluster_serving(cluster):
        return None, f"{name}: not Ready with a gateway address"
    labels = cluster["metadata"].get("labels") or {}
    wanted = ((template.get("clusterSelector") or {}).get("matchLabels")) or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return None, f"{name}: clusterSelector does not match"
    for taint in (cluster.get("spec") or {}).get("taints") or []:
        if not tolerated(taint, template.get("tolerations") or []):
            return None, f"{name}: taint {taint.get('key')}:{taint.get('effect')} not tolerated"
    requests = [
        request
        for engine in template.get("engines") or []
        for member in engine.get("members") or []
        for request in ((member.get("nodeSelector") or {}).get("devices")) or []
    ]
    for pool in (cluster.get("status") or {}).get("gpuPools") or []:
        devices = pool.get("devices") or []
        if requests and all(request_matches(r, devices) is not None for r in requests):
            return str(pool["name"]), ""
    return None, f"{name}: no pool has devices for every device request"


def served_model(replica: Obj) -> str | None:
    for engine in (replica.get("spec") or {}).get("engines") or []:
        for member in engine.get("members") or []:
            for container in ((member.get("template") or {}).get("spec") or {}).get("containers") or []:
                args = [str(a) for a in container.get("args") or []]
                for prefix in ("--served-model-name=", "--model="):
                    found = [a[len(prefix) :] for a in args if a.startswith(prefix)]
                    if found:
                        return found[-1]
    return None


def completion(cluster: str, replica: str, request: Obj) -> Obj:
    """The stand-in's deterministic OpenAI chat completion for ``request``."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    prompt = str(next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "") or "")
    words = f"Hello from the metalplane lab stand-in on {cluster} ({replica}); you asked: {prompt}".split()
    limit = int(request.get("max_tokens") or len(words))
    text = " ".join(words[:limit])
    digest = hashlib.sha256(f"{cluster}/{replica}/{prompt}".encode()).hexdigest()[:12]
    return {
        "id": f"chatcmpl-lab-{digest}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length" if len(words) > limit else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt.split()),
            "completion_tokens": min(limit, len(words)),
            "total_tokens": len(prompt.split()) + min(limit, len(words)),
        },
    }


class _Server:
    """A loopback HTTP server on its own thread; ``handle(method, path, body) -> (status, type, bytes)``."""

    def __init__(self, host: str, handle: Any) -> None:
        outer = handle

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, content_type, data = outer(self.command, self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.address = f"{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=f"lab-gateway-{self.address}", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _json(status: int, obj: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(obj).encode()


def _text(status: int, text: str) -> tuple[int, str, bytes]:
    return status, "text/plain; charset=utf-8", text.encode()


class Serving:
    """Gateway, scheduler and stand-ins of one lab control plane (``ModelplaneEmulator.serving``)."""

    def __init__(
        self,
        api: KubeEmulator,
        *,
        delay_scale: float,
        replica_ready_after: float,
        gateway_ready_after: float,
        host: str = LOOPBACK,
    ) -> None:
        self.api = api
        self.delay_scale = delay_scale
        self.replica_ready_after = replica_ready_after
        self.gateway_ready_after = gateway_ready_after
        self.host = host
        self.requests: list[Obj] = []  # every request a cluster gateway answered or refused
        self._lock = threading.Lock()
        self._front: _Server | None = None
        self._gateways: dict[str, _Server] = {}  # InferenceCluster name -> its workload gateway
        self._seen: dict[str, float] = {}  # uid -> when first seen (gateway, replica)

    # ---- lifecycle ------------------------------------------------------------------------------

    def stop(self) -> None:
        with self._lock:
            servers = [*self._gateways.values(), *([self._front] if self._front else [])]
            self._gateways.clear()
            self._front = None
        for server in servers:
            server.stop()

    def workload_gateway(self, cluster: str) -> str:
        """The loopback address of ``cluster``'s gateway stand-in (started on first use)."""
        with self._lock:
            if cluster not in self._gateways:
                self._gateways[cluster] = _Server(self.host, lambda m, p, b: self._workload(cluster, m, p, b))
            return self._gateways[cluster].address

    def drop_workload_gateway(self, cluster: str) -> None:
        with self._lock:
            server = self._gateways.pop(cluster, None)
        if server is not None:
            server.stop()

    def front_door(self) -> str:
        with self._lock:
            if self._front is None:
                self._front = _Server(self.host, self._route)
            return self._front.address

    def _elapsed(self, uid: str) -> float:
        return time.monotonic() - self._seen.setdefault(uid, time.monotonic())

    # ---- status writes --------------------------------------------------------------------------

    def _write_status(self, obj: Obj, status: Obj, conditions: dict[str, tuple[str, str, str]]) -> None:
        meta = obj["metadata"]
        old = obj.get("status") or {}
        previous = _conditions(obj)
        rendered = []
        for kind, (state, reason, message) in conditions.items():
            before = previous.get(kind) or {}
            entry = {
                "type": kind,
                "status": state,
                "reason": reason,
                "lastTransitionTime": before.get("lastTransitionTime", now_text())
                if before.get("status") == state
                else now_text(),
                "observedGeneration": meta.get("generation", 1),
            }
            if message:
                entry["message"] = message
            rendered.append(entry)
        status = {**status, "conditions": rendered}
        if status != old:
            self.api.set_status(
                API_VERSION, obj["kind"], meta["name"], status, namespace=meta.get("namespace"), replace=True
            )

    # ---- reconcile ------------------------------------------------------------------------------

    def reconcile(self, clusters: list[Obj]) -> None:
        """One pass over gateways, caches, deployments, replicas and services (``clusters``: fresh list)."""
        self._gateways_pass()
        caches = self.api.list(API_VERSION, "ModelCache")
        for cache in caches:
            self._cache(cache, clusters)
        caches = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c for c in self.api.list(API_VERSION, "ModelCache")
        }
        deployments = self.api.list(API_VERSION, "ModelDeployment")
        names = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in deployments}
        for replica in self.api.list(API_VERSION, "ModelReplica"):
            self._replica(replica, clusters, names, caches)
        for deployment in deployments:
            self._deployment(deployment, clusters)
        for service in self.api.list(API_VERSION, "ModelService"):
            self._service(service)

    def _gateways_pass(self) -> None:
        for gateway in self.api.list(API_VERSION, "InferenceGateway"):
            conditions = {"Synced": ("True", "ReconcileSuccess", "")}
            status: Obj = {}
            if gateway["metadata"]["name"] != GATEWAY_NAME:
                conditions["Ready"] = ("False", "Creating", f"the InferenceGateway must be named {GATEWAY_NAME!r}")
            elif self._elapsed(gateway["metadata"]["uid"]) >= self.gateway_ready_after * self.delay_scale:
                status["address"] = self.front_door()
                conditions["Ready"] = ("True", "Available", "")
            else:
                conditions["Ready"] = ("False", "Creating", "Traefik is being installed")
            self._write_status(gateway, status, conditions)

    def _cache(self, cache: Obj, clusters: list[Obj]) -> None:
        wanted = (((cache.get("spec") or {}).get("clusterSelector") or {}).get("matchLabels")) or {}
        entries = []
        for cluster in sorted(clusters, key=lambda c: c["metadata"]["name"]):
            labels = cluster["metadata"].get("labels") or {}
            status = cluster.get("status") or {}
            if any(labels.get(k) != v for k, v in wanted.items()):
                continue
            if not status.get("providerConfigRef") or not (status.get("cache") or {}).get("storageClassName"):
                continue
            entries.append({"name": cluster["metadata"]["name"], "phase": "Ready"})
        conditions = {
            "Synced": ("True", "ReconcileSuccess", ""),
            "ClustersMatched": ("True" if entries else "False", "Matched" if entries else "NoClusters", ""),
            "ArtifactReady": ("True" if entries else "False", "Staged" if entries else "NoClusters", ""),
            "Ready": ("True" if entries else "False", "Available" if entries else "Creating", ""),
        }
        summary = {"ready": f"{len(entries)}/{len(entries)}"}
        self._write_status(cache, {"summary": summary, "clusters": entries}, conditions)

    def _replica(self, replica: Obj, clusters: list[Obj], deployments: set[tuple[str, str]], caches: Any) -> None:
        meta = replica["metadata"]
        labels = meta.get("labels") or {}
        owner = labels.get(DEPLOYMENT_LABEL)
        by_name = {c["metadata"]["name"]: c for c in clusters}
        cluster = by_name.get((replica.get("spec") or {}).get("clusterName", ""))
        if (owner and (meta["namespace"], owner) not in deployments) or (owner and cluster is None):
            with contextlib.suppress(ApiError):
                self.api.delete(API_VERSION, "ModelReplica", meta["name"], meta["namespace"])
            return
        if cluster is None:
            return  # a test's hand-made replica pinned to a cluster that does not exist: left alone
        cache_ref = ((replica.get("spec") or {}).get("modelCacheRef") or {}).get("name")
        cache_ready = True
        if cache_ref:
            cache = caches.get((meta["namespace"], cache_ref))
            phases = {c.get("name"): c.get("phase") for c in ((cache or {}).get("status") or {}).get("clusters") or []}
            cache_ready = phases.get(cluster["metadata"]["name"]) == "Ready"
        if not cluster_serving(cluster):
            ready = ("False", "Unavailable", f"InferenceCluster {cluster['metadata']['name']} is not serving")
        elif not cache_ready:
            ready = ("False", "Creating", f"ModelCache {cache_ref} is not Ready on the cluster")
        elif self._elapsed(meta["uid"]) >= self.replica_ready_after * self.delay_scale:
            ready = ("True", "Available", "")
        else:
            ready = ("False", "Creating", "the engine is starting")
        self._write_status(replica, {}, {"Synced": ("True", "ReconcileSuccess", ""), "Ready": ready})

    def _deployment(self, deployment: Obj, clusters: list[Obj]) -> None:
        meta = deployment["metadata"]
        if meta.get("deletionTimestamp"):
            return
        spec = deployment.get("spec") or {}
        template = ((spec.get("template") or {}).get("spec")) or {}
        want = int(spec.get("replicas", 1))
        replicas = self.api.list(
            API_VERSION,
            "ModelReplica",
            namespace=meta["namespace"],
            label_selector=f"{DEPLOYMENT_LABEL}={meta['name']}",
        )
        placed = {(r.get("spec") or {}).get("clusterName") for r in replicas}
        reasons = []
        for cluster in sorted(clusters, key=lambda c: c["metadata"]["name"]):
            if len(replicas) >= want:
                break
            if cluster["metadata"]["name"] in placed:
                continue
            pool, why = placement(cluster, template)
            if pool is None:
                reasons.append(why)
                continue
            replicas.append(self._place(deployment, template, cluster, pool))
        for extra in replicas[want:]:
            with contextlib.suppress(ApiError):
                self.api.delete(API_VERSION, "ModelReplica", extra["metadata"]["name"], meta["namespace"])
        replicas = replicas[:want]
        ready = sum(1 for r in replicas if is_true(r, "Ready"))
        if len(replicas) >= want:
            scheduled = ("True", "AllScheduled", "")
        elif not clusters:
            scheduled = ("False", "NoClusters", "no InferenceCluster exists")
        else:
            scheduled = ("False", "InsufficientCapacity", "; ".join(reasons) or "no eligible cluster")
        all_ready = ready >= want
        conditions = {
            "Synced": ("True", "ReconcileSuccess", ""),
            "ReplicasScheduled": scheduled,
            "ReplicasReady": ("True" if all_ready else "False", "AllReady" if all_ready else "Waiting", ""),
            "Ready": ("True" if all_ready else "False", "Available" if all_ready else "Creating", ""),
        }
        self._write_status(deployment, {"replicas": {"total": len(replicas), "ready": ready}}, conditions)

    def _place(self, deployment: Obj, template: Obj, cluster: Obj, pool: str) -> Obj:
        """Compose the ModelReplica for ``cluster`` (valid to the ModelReplica XRD, CEL rules included)."""
        meta = deployment["metadata"]
        devices = next(p for p in cluster["status"]["gpuPools"] if p["name"] == pool).get("devices") or []
        engines = []
        for engine in template.get("engines") or []:
            members = []
            for member in engine.get("members") or []:
                requests = []
                for request in ((member.get("nodeSelector") or {}).get("devices")) or []:
                    device = request_matches(request, devices) or {}
                    requests.append(
                        {
                            "name": request["name"],
                            "deviceClassName": device.get("deviceClassName") or device.get("driver") or "",
                            "count": int(request.get("count", 1)),
                            "selectors": request.get("selectors") or [],
                        }
                    )
                out = {
                    "role": member.get("role", "Standalone"),
                    "nodePoolName": pool,
                    "template": member.get("template") or {},
                }
                if requests:
                    out["deviceRequests"] = requests
                if member.get("worker"):
                    out["worker"] = member["worker"]
                members.append(out)
            engines.append({"name": engine["name"], "members": members})
        suffix = hashlib.sha256(f"{meta['uid']}/{cluster['metadata']['name']}".encode()).hexdigest()[:5]
        spec: Obj = {"clusterName": cluster["metadata"]["name"], "engines": engines}
        if template.get("modelCacheRef"):
            spec["modelCacheRef"] = template["modelCacheRef"]
        replica = {
            "apiVersion": API_VERSION,
            "kind": "ModelReplica",
            "metadata": {
                "name": f"{meta['name']}-{suffix}",
                "namespace": meta["namespace"],
                "labels": {
                    **(((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels", {}),
                    DEPLOYMENT_LABEL: meta["name"],
                    CLUSTER_LABEL: cluster["metadata"]["name"],
                },
            },
            "spec": spec,
        }
        return self.api.create(replica)

    def _service(self, service: Obj) -> None:
        meta = service["metadata"]
        replicas = self._endpoints(service)
        ready = [r for r in replicas if is_true(r, "Ready")]
        gateway = self.api.get(API_VERSION, "InferenceGateway", GATEWAY_NAME)
        address = ((gateway or {}).get("status") or {}).get("address")
        routed = bool(ready) and bool(address) and is_true(gateway, "Ready")
        conditions = {
            "Synced": ("True", "ReconcileSuccess", ""),
            "EndpointsResolved": ("True" if replicas else "False", "Resolved" if replicas else "NoEndpoints", ""),
            "RoutingReady": ("True" if routed else "False", "Routed" if routed else "Waiting", ""),
            "Ready": ("True" if routed else "False", "Available" if routed else "Creating", ""),
        }
        status = {"address": f"http://{address}/{meta['namespace']}/{meta['name']}"} if address else {}
        self._write_status(service, status, conditions)

    def _endpoints(self, service: Obj) -> list[Obj]:
        namespace = service["metadata"]["namespace"]
        out: dict[str, Obj] = {}
        for endpoint in (service.get("spec") or {}).get("endpoints") or []:
            labels = ((endpoint.get("selector") or {}).get("matchLabels")) or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
            for replica in self.api.list(API_VERSION, "ModelReplica", namespace=namespace, label_selector=selector):
                out[replica["metadata"]["name"]] = replica
        return [out[k] for k in sorted(out)]

    # ---- HTTP -----------------------------------------------------------------------------------

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:  # noqa: PLR0911
        """The front door (Traefik's part): ``/<namespace>/<service>/v1/...`` to a Ready replica's cluster."""
        if method == "GET" and path == "/lab/requests":
            with self._lock:
                return _json(200, {"requests": list(self.requests)})
        parts = path.split("?", 1)[0].strip("/").split("/")
        if len(parts) < 3 or parts[2] != "v1":
            return _text(404, TRAEFIK_NOT_FOUND)
        namespace, name, rest = parts[0], parts[1], "/".join(parts[2:])
        try:
            service = self.api.get(API_VERSION, "ModelService", name, namespace)
        except ApiError:
            service = None
        if service is None:
            return _text(404, TRAEFIK_NOT_FOUND)
        clusters = {c["metadata"]["name"]: c for c in self.api.list(API_VERSION, "InferenceCluster")}
        for replica in self._endpoints(service):
            cluster = clusters.get((replica.get("spec") or {}).get("clusterName", ""))
            address = (((cluster or {}).get("status") or {}).get("gateway") or {}).get("address")
            if not is_true(replica, "Ready") or not address:
                continue
            url = f"http://{address}/{namespace}/{replica['metadata']['name']}/{rest}"
            request = urllib.request.Request(
                url, data=body or None, method=method, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=FORWARD_TIMEOUT) as answer:
                    return answer.status, answer.headers.get("Content-Type", "application/json"), answer.read()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.headers.get("Content-Type", "text/plain"), exc.read()
            except OSError:
                return _text(502, "Bad Gateway")
        return _text(503, TRAEFIK_NO_SERVER)

    def _workload(self, cluster: str, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        """A cluster's gateway stand-in: ``/<namespace>/<replica>/v1/chat/completions`` answered and recorded."""
        parts = path.split("?", 1)[0].strip("/").split("/")
        if len(parts) < 3:
            return _text(404, "")
        namespace, name, rest = parts[0], parts[1], "/".join(parts[2:])
        record: Obj = {"cluster": cluster, "namespace": namespace, "replica": name, "method": method, "path": rest}
        try:
            record["body"] = json.loads(body or b"null")
        except ValueError:
            record["body"] = body.decode("utf-8", "replace")
        replica = self.api.get(API_VERSION, "ModelReplica", name, namespace)
        if (
            replica is None
            or (replica.get("spec") or {}).get("clusterName") != cluster
            or not is_true(replica, "Ready")
        ):
            answer = _text(503, ENVOY_NO_UPSTREAM)
        elif method != "POST" or rest != "v1/chat/completions":
            answer = _json(404, {"object": "error", "message": f"{method} /{rest} is not served", "code": 404})
        elif not isinstance(record["body"], dict):
            answer = _json(400, {"object": "error", "message": "the body is not a JSON object", "code": 400})
        elif record["body"].get("model") != served_model(replica):
            message = f"The model `{record['body'].get('model')}` does not exist."
            answer = _json(404, {"object": "error", "message": message, "type": "NotFoundError", "code": 404})
        else:
            answer = _json(200, completion(cluster, name, record["body"]))
        record["status"] = answer[0]
        with self._lock:
            self.requests.append(record)
        return answer
