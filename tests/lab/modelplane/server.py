"""A Modelplane control-plane emulator: a Kubernetes API with the Modelplane CRDs and a simulated controller.

Why: adoption (``source: Existing``) ends when the InferenceCluster reports ``Ready``,
``ClusterReady=True/ClusterRunning``, ``BackendReady=True/BackendHealthy`` and a non-empty
``status.gateway.address``. Real Modelplane needs Crossplane, Helm and a GPU cluster; the lab has none,
so this controller produces those signals the way compose-inference-cluster does, from the same
inputs: the kubeconfig Secret in ``modelplane-system`` and the referenced InferenceClasses.

In-process (tests)::

    from lab.modelplane.server import ModelplaneEmulator
    with ModelplaneEmulator(delay_scale=0.0) as mp:
        mp.kubeconfig_path        # control-plane kubeconfig (token inside)
        mp.api                    # the lab.kube.server.KubeEmulator (create/apply/get/list)

Out of process (labctl): ``python -m lab.modelplane.server --host H --port N --state-dir DIR
[--delay-scale F] [--backend-ready-after S]``; writes ``DIR/modelplane.kubeconfig`` once the CRDs
are served. Behaviour and limits: ``docs/lab/twin.md``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import shutil
import ssl
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml

from lab.common.emulator import LOOPBACK, emulator_arguments, serve_until_signalled
from lab.kube.api import ApiError
from lab.kube.gpu import DRA_DRIVER, device_class, dra_devices, resource_slice
from lab.kube.server import KubeEmulator
from lab.modelplane.crds import CRDS, GROUP, SOURCES, VERSION
from lab.modelplane.serving import Serving

Obj = dict[str, Any]
API_VERSION = f"{GROUP}/{VERSION}"
NAMESPACE = "modelplane-system"
DEFAULT_TOKEN = "lab-modelplane-token"  # a well-known lab credential: the lab is loopback only
# Crossplane puts this finalizer on every composite resource.
FINALIZER = "composite.apiextensions.crossplane.io"
CLUSTER_LABEL = "modelplane.ai/cluster"
POOL_LABEL = "modelplane.ai/pool"
TICK_SECONDS = 0.2
# How often a Ready cluster's workload nodes are re-listed for new GPU nodes (HTTPS, so not every tick).
SLICE_SYNC_SECONDS = 2.0
KUBECONFIG_FILE = "modelplane.kubeconfig"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _hash(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


def model_replica(name: str, cluster: str, *, namespace: str = "default", pool: str = "gpu") -> Obj:
    """A ModelReplica pinned to InferenceCluster ``cluster`` that the XRD accepts, CEL rules included
    (one Standalone member with device requests, its single container named ``engine``). Modelplane
    composes these from a ModelDeployment; tests create them to exercise the ClusterUsage guard."""
    member = {
        "role": "Standalone",
        "nodePoolName": pool,
        "deviceRequests": [{"name": "gpu", "deviceClassName": DRA_DRIVER}],
        "template": {"spec": {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0"}]}},
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "ModelReplica",
        "metadata": {"name": name, "namespace": namespace, "labels": {CLUSTER_LABEL: cluster}},
        "spec": {"clusterName": cluster, "engines": [{"name": "vllm", "members": [member]}]},
    }


class WorkloadClient:
    """A minimal Kubernetes client for the workload cluster an adopted kubeconfig names (token auth)."""

    def __init__(self, server: str, token: str, context: ssl.SSLContext) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.context = context

    @classmethod
    def from_kubeconfig(cls, config: Obj) -> WorkloadClient | None:
        contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
        context = contexts.get(config.get("current-context")) or next(iter(contexts.values()), {})
        clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
        users = {u.get("name"): u.get("user") or {} for u in config.get("users") or []}
        cluster, user = clusters.get(context.get("cluster")), users.get(context.get("user"))
        if not cluster or not user or not cluster.get("server") or not user.get("token"):
            return None  # client certificates / exec plugins: not simulated
        tls = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif cluster.get("certificate-authority-data"):
            tls.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        if cluster.get("tls-server-name"):
            tls.check_hostname = False  # the lab certificates name 127.0.0.1/localhost only
        return cls(cluster["server"], user["token"], tls)

    def _request(self, method: str, path: str, body: Obj | None = None, query: dict[str, str] | None = None) -> Obj:
        url = self.server + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=5, context=self.context) as response:
            return json.loads(response.read() or b"{}")

    def get(self, path: str, query: dict[str, str] | None = None) -> Obj:
        return self._request("GET", path, query=query)

    def slices(self, node: str) -> list[Obj]:
        query = {"fieldSelector": f"spec.driver={DRA_DRIVER},spec.nodeName={node}"}
        return self.get("/apis/resource.k8s.io/v1/resourceslices", query)["items"]

    def create(self, path: str, body: Obj) -> None:
        try:
            self._request("POST", path, body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # AlreadyExists is fine (DeviceClass)
                raise

    def delete(self, path: str) -> None:
        try:
            self._request("DELETE", path)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise


class ModelplaneEmulator:
    """A control-plane KubeEmulator with the Modelplane CRDs and a controller thread."""

    def __init__(
        self,
        delay_scale: float = 0.0,
        token: str = DEFAULT_TOKEN,
        *,
        state_dir: Path | str | None = None,
        host: str = LOOPBACK,
        port: int | None = None,
        backend_ready_after: float = 30.0,
        publish_slices: bool = True,
        crds: tuple[Obj, ...] = CRDS,
        replica_ready_after: float = 5.0,
        gateway_ready_after: float = 2.0,
        extra_crds: tuple[Obj, ...] = (),
    ) -> None:
        self.delay_scale = delay_scale
        self.crds = crds  # lab.modelplane.crds: generated from the reference XRDs, or the fallback
        # More CRDs to serve on the same control plane, e.g. Metal3's BareMetalHost (lab.metal3.contract.bmh_crd):
        # a management cluster that runs Modelplane and Metal3 side by side. Opt-in: none by default.
        self.extra_crds = extra_crds
        self.backend_ready_after = backend_ready_after
        self.publish_slices = publish_slices
        self._tmp = None if state_dir else tempfile.mkdtemp(prefix="modelplane-lab-")
        directory = Path(state_dir) if state_dir else Path(str(self._tmp))
        self.api = KubeEmulator(delay_scale, token, "modelplane", state_dir=directory, host=host, port=port)
        # The gateway, the scheduler and the OpenAI-compatible stand-ins (lab.modelplane.serving).
        self.serving = Serving(
            self.api,
            delay_scale=delay_scale,
            replica_ready_after=replica_ready_after,
            gateway_ready_after=gateway_ready_after,
            host=host,
        )
        self.errors: list[str] = []
        self._resolved_at: dict[str, float] = {}  # uid -> when Secret and classes first resolved
        self._published: dict[str, set[tuple[str, str]]] = {}  # uid -> {(workload url, node)}
        self._slices_synced: dict[str, float] = {}  # uid -> when the workload nodes were last listed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.api.url

    @property
    def kubeconfig_path(self) -> Path:
        return self.api.kubeconfig_path

    @property
    def requests(self) -> list[Obj]:
        """Every chat request a cluster's gateway stand-in received (cluster, replica, path, body, status)."""
        return list(self.serving.requests)

    def ensure_namespace(self, name: str) -> None:
        """Create namespace ``name`` on the control plane unless it exists (Modelplane's examples use ml-team)."""
        if self.api.get("v1", "Namespace", name) is None:
            with contextlib.suppress(ApiError):  # created meanwhile
                self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def gateway_address(self, name: str) -> str:
        """The loopback address of InferenceCluster ``name``'s workload gateway stand-in (its status.gateway.address
        once it is BackendHealthy)."""
        return self.serving.workload_gateway(name)

    def start(self) -> ModelplaneEmulator:
        self.api.start()
        if self.api.get("v1", "Namespace", NAMESPACE) is None:
            self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for crd in (*self.crds, *self.extra_crds):
            self.api.create(crd)
        self._wait_served()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="modelplane-controller", daemon=True)
        self._thread.start()
        return self

    def _established(self, name: str) -> bool:
        crd = self.api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) or {}
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def _wait_served(self, timeout: float = 30.0) -> None:
        """Until discovery lists every CRD's resource (0.5 s x delay_scale after creation) and every CRD
        reports Established (its status write comes last: a caller that then counts writes sees none)."""
        deadline = time.monotonic() + timeout
        crds = (*self.crds, *self.extra_crds)
        wanted: dict[str, set[str]] = {}  # group/version -> plurals
        for crd in crds:
            version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
            wanted.setdefault(f"{crd['spec']['group']}/{version}", set()).add(crd["spec"]["names"]["plural"])
        while True:
            with contextlib.suppress(ApiError):
                served = all(
                    plurals <= {r["name"] for r in self.api.call("GET", f"/apis/{gv}").get("resources") or []}
                    for gv, plurals in wanted.items()
                )
                if served and all(self._established(crd["metadata"]["name"]) for crd in crds):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Modelplane CRDs not served after {timeout} s")
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.serving.stop()
        self.api.stop()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> ModelplaneEmulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # ---- controller -----------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self.reconcile_all()

    def reconcile_all(self) -> None:
        try:
            clusters = self.api.list(API_VERSION, "InferenceCluster")
        except ApiError:
            return
        for cluster in clusters:
            try:
                self.reconcile(cluster)
            except ApiError as exc:
                if exc.code not in (404, 409):  # gone or changed meanwhile: next tick
                    self.errors.append(traceback.format_exc())
            except Exception:
                self.errors.append(traceback.format_exc())
        try:
            self.serving.reconcile(self.api.list(API_VERSION, "InferenceCluster"))
        except ApiError as exc:
            if exc.code not in (404, 409):
                self.errors.append(traceback.format_exc())
        except Exception:
            self.errors.append(traceback.format_exc())

    def reconcile(self, cluster: Obj) -> None:
        meta = cluster["metadata"]
        name, uid = meta["name"], meta["uid"]
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            self._finalize(cluster, finalizers)
            return
        if FINALIZER not in finalizers:
            self.api.patch(
                API_VERSION, "InferenceCluster", name, {"metadata": {"finalizers": [*finalizers, FINALIZER]}}
            )
        spec = cluster.get("spec") or {}
        source = (spec.get("cluster") or {}).get("source")
        pools = spec.get("nodePools") or []
        status: Obj = {"namespace": NAMESPACE}
        conditions: dict[str, tuple[str, str, str]] = {"Synced": ("True", "ReconcileSuccess", "")}
        classes = {p["className"]: self.api.get(API_VERSION, "InferenceClass", p["className"]) for p in pools}
        missing = sorted(k for k, v in classes.items() if v is None)
        kubeconfig = self._kubeconfig(spec) if source == "Existing" else None
        if source != "Existing":
            conditions["ClusterReady"] = (
                "False",
                "Unsupported",
                f"the lab simulates source Existing only, not {source}",
            )
            conditions["BackendReady"] = ("False", "Installing", "")
            conditions["Ready"] = ("False", "Creating", "")
            self._resolved_at.pop(uid, None)
        elif missing:
            conditions["ClusterReady"] = (
                "False",
                "WaitingForClasses",
                f"InferenceClass not found: {', '.join(missing)}",
            )
            conditions["BackendReady"] = ("False", "Installing", "")
            conditions["Ready"] = ("False", "Creating", "")
            self._resolved_at.pop(uid, None)
        else:
            secret_name = spec["cluster"]["existing"]["secretRef"]["name"]
            status["providerConfigRef"] = {"name": f"{name}-cluster-kubeconfig-{_hash(uid)[:5]}"}
            status["gpuPools"] = [
                {
                    "name": p["name"],
                    "nodes": p.get("maxNodeCount", p.get("nodeCount", 1)),
                    "devices": (classes[p["className"]] or {}).get("spec", {}).get("devices", []),
                }
                for p in pools
            ]
            cache = (spec["cluster"]["existing"].get("cache") or {}).get("storageClassName")
            if cache:
                status["cache"] = {"storageClassName": cache}
            conditions["ClusterReady"] = ("True", "ClusterRunning", "")
            if kubeconfig is None:
                message = f"kubeconfig Secret {NAMESPACE}/{secret_name} (or its key) not found"
                conditions["BackendReady"] = ("False", "Installing", message)
                conditions["Ready"] = ("False", "Creating", message)
                self._resolved_at.pop(uid, None)
            else:
                since = self._resolved_at.setdefault(uid, time.monotonic())
                if time.monotonic() - since >= self.backend_ready_after * self.delay_scale:
                    conditions["BackendReady"] = ("True", "BackendHealthy", "")
                    conditions["Ready"] = ("True", "Available", "")
                    status["gateway"] = {"address": self.serving.workload_gateway(name)}
                    if self.publish_slices:
                        self._publish(uid, kubeconfig, {p["name"] for p in pools})
                else:
                    conditions["BackendReady"] = ("False", "Installing", "serving stack is being installed")
                    conditions["Ready"] = ("False", "Creating", "")
        self._write_status(cluster, status, conditions)

    def _kubeconfig(self, spec: Obj) -> Obj | None:
        ref = ((spec.get("cluster") or {}).get("existing") or {}).get("secretRef") or {}
        if not ref.get("name"):
            return None
        secret = self.api.get("v1", "Secret", ref["name"], NAMESPACE)
        data = ((secret or {}).get("data") or {}).get(ref.get("key", "kubeconfig"))
        if not data:
            return None
        try:
            parsed = yaml.safe_load(base64.b64decode(data))
        except (ValueError, yaml.YAMLError):
            return None
        return parsed if isinstance(parsed, dict) else None

    def _write_status(self, cluster: Obj, status: Obj, conditions: dict[str, tuple[str, str, str]]) -> None:
        old = cluster.get("status") or {}
        previous = {c.get("type"): c for c in old.get("conditions") or []}
        generation = cluster["metadata"].get("generation", 1)
        rendered = []
        for kind, (state, reason, message) in conditions.items():
            before = previous.get(kind) or {}
            same = before.get("status") == state
            entry = {
                "type": kind,
                "status": state,
                "reason": reason,
                "lastTransitionTime": before.get("lastTransitionTime", _now()) if same else _now(),
                "observedGeneration": generation,
            }
            if message:
                entry["message"] = message
            rendered.append(entry)
        status["conditions"] = rendered
        if status != old:
            self.api.set_status(API_VERSION, "InferenceCluster", cluster["metadata"]["name"], status, replace=True)

    # ---- DRA ResourceSlices in the workload cluster ------------------------------------------------

    def _publish(self, uid: str, kubeconfig: Obj, pool_names: set[str]) -> None:
        """What the NVIDIA DRA driver (installed by the ServingStack) does: one ResourceSlice per GPU
        node of the cluster's pools, written through the adopted kubeconfig (HTTPS + token)."""
        now = time.monotonic()
        if now - self._slices_synced.get(uid, -SLICE_SYNC_SECONDS) < SLICE_SYNC_SECONDS:
            return
        self._slices_synced[uid] = now
        workload = WorkloadClient.from_kubeconfig(kubeconfig)
        if workload is None:
            return
        try:
            nodes = workload.get("/api/v1/nodes")["items"]
        except OSError:  # unreachable (e.g. the Secret names an address this host cannot reach): retry later
            return
        done = self._published.setdefault(uid, set())
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            node_name = node["metadata"]["name"]
            found = dra_devices(node)
            if found is None or labels.get(POOL_LABEL) not in pool_names or (workload.server, node_name) in done:
                continue
            product_name, count, memory = found
            body = resource_slice(node_name, node["metadata"]["uid"], product_name, count, memory)
            workload.create("/apis/resource.k8s.io/v1/deviceclasses", device_class())
            for old in workload.slices(node_name):
                workload.delete(f"/apis/resource.k8s.io/v1/resourceslices/{old['metadata']['name']}")
            workload.create("/apis/resource.k8s.io/v1/resourceslices", body)
            done.add((workload.server, node_name))

    def _unpublish(self, uid: str, kubeconfig: Obj | None) -> None:
        published = self._published.pop(uid, set())
        self._slices_synced.pop(uid, None)
        workload = WorkloadClient.from_kubeconfig(kubeconfig) if kubeconfig else None
        if workload is None:
            return
        for server, node_name in published:
            if server != workload.server:
                continue
            with contextlib.suppress(OSError):
                for old in workload.slices(node_name):
                    workload.delete(f"/apis/resource.k8s.io/v1/resourceslices/{old['metadata']['name']}")

    def _finalize(self, cluster: Obj, finalizers: list[str]) -> None:
        """Deletion: held while a ModelReplica is pinned (the ClusterUsage guard), then clean up."""
        name, uid = cluster["metadata"]["name"], cluster["metadata"]["uid"]
        if FINALIZER not in finalizers:
            return
        if self.api.list(API_VERSION, "ModelReplica", label_selector=f"{CLUSTER_LABEL}={name}"):
            return
        self._unpublish(uid, self._kubeconfig(cluster.get("spec") or {}))
        self.serving.drop_workload_gateway(name)
        self._resolved_at.pop(uid, None)
        remaining = [f for f in finalizers if f != FINALIZER]
        self.api.patch(API_VERSION, "InferenceCluster", name, {"metadata": {"finalizers": remaining or None}})


def main(argv: list[str] | None = None) -> int:
    parser = emulator_arguments("Modelplane control-plane emulator (metalplane lab)")
    parser.add_argument("--token", default=DEFAULT_TOKEN, help="bearer token clients must send")
    parser.add_argument(
        "--backend-ready-after",
        type=float,
        default=30.0,
        help="seconds (times --delay-scale) from Secret and classes resolving to BackendHealthy",
    )
    parser.add_argument(
        "--replica-ready-after",
        type=float,
        default=5.0,
        help="seconds (times --delay-scale) from a ModelReplica's placement to Ready (the engine starting)",
    )
    parser.add_argument(
        "--gateway-ready-after",
        type=float,
        default=2.0,
        help="seconds (times --delay-scale) from an InferenceGateway's creation to Ready",
    )
    args = parser.parse_args(argv)
    state_dir: Path = args.state_dir or Path(tempfile.mkdtemp(prefix="modelplane-lab-"))
    published = state_dir / KUBECONFIG_FILE
    published.unlink(missing_ok=True)
    emulator = ModelplaneEmulator(
        args.delay_scale,
        args.token,
        state_dir=state_dir / "modelplane",
        host=args.host,
        port=args.port,
        backend_ready_after=args.backend_ready_after,
        replica_ready_after=args.replica_ready_after,
        gateway_ready_after=args.gateway_ready_after,
    )
    emulator.start()
    for kind, source in SOURCES.items():  # where the served schemas come from (docs/lab/twin.md)
        print(f"modelplane: {kind} CRD from {source}", file=sys.stderr)
    tmp = published.with_suffix(".tmp")
    tmp.write_bytes(emulator.kubeconfig_path.read_bytes())
    tmp.chmod(0o600)
    tmp.replace(published)  # the ready file: written once the CRDs are served
    serve_until_signalled(emulator.stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
