# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving smoke test: one chat completion through Modelplane's public gateway, served by this cluster.

Why: "inference-ready in Modelplane" is only proven when a request sent the way a user sends it is
answered by a model running on the cluster just adopted. Modelplane's own end-to-end test ends the
same way (``e2e/run.sh --verify`` at v0.3.1, ``90ba117d``: a ModelDeployment and a ModelService, then
``curl http://<gateway>/<namespace>/<service>/v1/chat/completions``). So the test:

1. checks that the control plane's ``InferenceGateway default`` is Ready with an address and that
   the InferenceCluster is serving (``readiness.unmet``);
2. picks the pool (the first with a GPU device unless one is named) and its InferenceClass, refuses
   a request for more GPUs than one node has (a Standalone member runs on one node; multi-node
   serving needs a GPU fabric between nodes, which VKE GPU nodes lack), and picks the engine image
   and arguments for that GPU generation (``engines.py``);
3. writes a ModelDeployment (plus a ModelCache when a cache size is given) whose
   ``clusterSelector`` matches ``metalplane.inference/cluster=<cluster>``, a label only this
   InferenceCluster carries (the adoption sets it), and whose device request selects the pool's GPU
   (driver and product name, else memory), and a ModelService selecting the deployment's replicas
   (``modelplane.ai/deployment``, the label Modelplane puts on them);
4. waits until a ModelReplica of the deployment is scheduled on this cluster, then Ready;
5. sends one chat completion to ``http://<gateway>/<namespace>/<service>/v1/chat/completions``
   (retrying while the route converges: 404/502/503/504 and refused connections), checks the answer is
   OpenAI-shaped (``choices[0].message.content``), and
6. removes everything it created and waits until the replica is gone (the GPU is free again and an
   un-adoption is not refused), even when a step failed.

Each failure says which step and what was seen: the ``ReplicasScheduled`` condition when nothing was
scheduled, the replica's conditions and the workload pod with its last event when it never became
Ready, the gateway's HTTP status and the start of its answer, what is missing from a malformed answer.

``changed`` is false when the objects it created are gone again (the cluster is as it was); true
when it removed leftovers of an interrupted earlier run, or kept its objects (``keep_objects``).
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_seconds
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    InputError,
    MetalplaneError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import (
    Backoff,
    Deadline,
    Poll,
    wait_for,
)
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KUBERNETES_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import (
    engines,
    gateway,
    plan,
    readiness,
    validate,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    API_VERSION,
    CLUSTER_LABEL,
    DEPLOYMENT_LABEL,
    KIND_INFERENCE_CLASS,
    KIND_INFERENCE_CLUSTER,
    KIND_MODEL_CACHE,
    KIND_MODEL_DEPLOYMENT,
    KIND_MODEL_REPLICA,
    KIND_MODEL_SERVICE,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MAX_DEVICE_COUNT,
    NVIDIA_DRA_DRIVER,
)

# Marks the smoke test's objects, so a later run (or a teardown) finds and removes leftovers by label.
SMOKE_LABEL = "metalplane.inference/smoke"
# Engine and container names: the XRD requires the single container to be named "engine".
ENGINE_NAME = "smoke"
CONTAINER_NAME = "engine"
# Modelplane runs the replica's workloads in this namespace of the workload cluster.
WORKLOAD_NAMESPACE = "default"
# Object names stay short: Modelplane derives replica and workload names from them (<name>-<5 hex> and more).
MAX_NAME = 40
DEFAULT_PROMPT = "Reply with one short sentence: is this GPU cluster serving?"
# What counts as "the route is not there yet" rather than a refusal: Traefik answers 404 until the
# ModelService's HTTPRoute exists and 502/503 while it has no healthy endpoint.
RETRY_STATUSES = (404, 502, 503, 504)
# The answer's first words shown in the result and on the timeline.
ANSWER_WORDS = 16
ANSWER_CHARS = 160
BODY_HEAD = 300
POLL = Backoff(initial=0.5, cap=5.0, factor=1.5, jitter=0.1)

Connect = Callable[[Mapping[str, Any], str], Any]
Post = Callable[[str, dict[str, Any], float], tuple[int, str]]


@dataclass(frozen=True)
class Target:
    """Where the smoke test lands: the cluster's pool, its class and the GPU device the class describes."""

    cluster: str
    pool: str
    class_name: str
    device: dict[str, Any]


# ---- pure parts ----------------------------------------------------------------------------------


def object_name(cluster: str, name: str | None = None) -> str:
    """The smoke objects' name: ``name``, or ``smoke-<cluster>`` shortened with a hash to ``MAX_NAME``."""
    if name:
        return validate.dns_label("name", name)
    base = f"smoke-{cluster}"
    if len(base) > MAX_NAME:
        digest = hashlib.sha256(base.encode()).hexdigest()[:5]
        base = f"{base[: MAX_NAME - 6].rstrip('-')}-{digest}"
    return base


def smoke_labels(cluster: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, CLUSTER_LABEL: cluster, SMOKE_LABEL: "true"}


def smoke_selector(cluster: str) -> str:
    return f"{CLUSTER_LABEL}={cluster},{SMOKE_LABEL}=true"


def choose_target(
    cluster: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any] | None], pool: str | None
) -> Target:
    """The pool to serve from (named, else the first whose class has a GPU device) and its GPU device."""
    name = cluster["metadata"]["name"]
    pools = ((cluster.get("spec") or {}).get("nodePools")) or []
    if pool:
        chosen = [p for p in pools if p.get("name") == pool]
        if not chosen:
            known = ", ".join(str(p.get("name")) for p in pools) or "none"
            raise InputError("pool", f"InferenceCluster {name!r} has no node pool {pool!r} (its pools: {known})")
    else:
        chosen = [p for p in pools if plan.gpu_device(classes.get(p.get("className", ""))) is not None]
        if not chosen:
            raise InputError(
                "pool",
                f"no node pool of InferenceCluster {name!r} has a class with an NVIDIA DRA GPU device: name the pool",
            )
    entry = chosen[0]
    class_name = str(entry.get("className"))
    device = plan.gpu_device(classes.get(class_name))
    if device is None:
        raise InputError(
            "pool", f"pool {entry.get('name')!r} uses class {class_name!r}, which has no NVIDIA GPU device"
        )
    return Target(cluster=name, pool=str(entry["name"]), class_name=class_name, device=device)


def check_single_node(gpus: int, target: Target, field: str = "gpus") -> None:
    """Refuse a replica that needs more GPUs than one node of the pool has (naming the fabric limit)."""
    if not 1 <= gpus <= MAX_DEVICE_COUNT:
        raise InputError(field, f"must be between 1 and {MAX_DEVICE_COUNT} GPUs, got {gpus}")
    per_node = int(target.device.get("count", 1))
    if gpus > per_node:
        raise InputError(
            field,
            f"{gpus} GPUs for one replica, but the nodes of pool {target.pool!r} (class {target.class_name!r}) have "
            f"{per_node} each. More GPUs than one node has means multi-node serving, which needs a GPU fabric "
            "(InfiniBand or RDMA) between nodes; VKE GPU nodes have none, so serving is single-node only: ask for at "
            f"most {per_node}, or use a pool of larger nodes",
            details={"gpus": gpus, "per_node": per_node, "pool": target.pool},
        )


def device_selectors(device: Mapping[str, Any]) -> list[dict[str, str]]:
    """DRA CEL selectors that match the class's GPU and not another pool's: driver, then product name or memory."""
    driver = str(device.get("driver") or NVIDIA_DRA_DRIVER)
    selectors = [{"cel": f"device.driver == {json.dumps(driver)}"}]
    product = ((device.get("attributes") or {}).get("productName") or {}).get("string")
    memory = ((device.get("capacity") or {}).get("memory") or {}).get("value")
    if product:
        selectors.append({"cel": f"device.attributes[{json.dumps(driver)}].productName == {json.dumps(product)}"})
    elif memory:
        selectors.append(
            {"cel": f"device.capacity[{json.dumps(driver)}].memory.compareTo(quantity({json.dumps(memory)})) >= 0"}
        )
    return selectors


def model_deployment(
    name: str,
    namespace: str,
    target: Target,
    *,
    gpus: int,
    engine: Mapping[str, Any],
    cache: str | None = None,
) -> dict[str, Any]:
    """One replica, one Standalone engine on ``gpus`` GPUs of the pool's class, pinned to the cluster."""
    spec: dict[str, Any] = {
        "clusterSelector": {"matchLabels": {CLUSTER_LABEL: target.cluster}},
        "engines": [
            {
                "name": ENGINE_NAME,
                "members": [
                    {
                        "role": "Standalone",
                        "nodeSelector": {
                            "devices": [
                                {
                                    "name": str(target.device.get("name") or "gpu"),
                                    "count": gpus,
                                    "selectors": device_selectors(target.device),
                                }
                            ]
                        },
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": CONTAINER_NAME, "image": engine["image"], "args": list(engine["args"])}
                                ]
                            }
                        },
                    }
                ],
            }
        ],
    }
    if cache:
        spec["modelCacheRef"] = {"name": cache}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_MODEL_DEPLOYMENT,
        "metadata": {"name": name, "namespace": namespace, "labels": smoke_labels(target.cluster)},
        "spec": {"replicas": 1, "template": {"spec": spec}},
    }


def model_service(name: str, namespace: str, cluster: str, deployment: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_MODEL_SERVICE,
        "metadata": {"name": name, "namespace": namespace, "labels": smoke_labels(cluster)},
        "spec": {"endpoints": [{"selector": {"matchLabels": {DEPLOYMENT_LABEL: deployment}}}]},
    }


def model_cache(name: str, namespace: str, cluster: str, *, model: str, size_gib: int) -> dict[str, Any]:
    if not 1 <= size_gib <= 100000:
        raise InputError("cache_size_gib", f"must be between 1 and 100000 GiB (the XRD's bounds), got {size_gib}")
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_MODEL_CACHE,
        "metadata": {"name": name, "namespace": namespace, "labels": smoke_labels(cluster)},
        "spec": {
            "source": "HuggingFace",
            "huggingFace": {"repo": model, "sizeGiB": size_gib},
            "clusterSelector": {"matchLabels": {CLUSTER_LABEL: cluster}},
        },
    }


def chat_url(gateway_address: str, namespace: str, service: str) -> str:
    """Modelplane's public URL of a ModelService (``http://<gateway>/<namespace>/<service>/v1/...``)."""
    host = gateway_address.strip().rstrip("/")
    if not host.startswith(("http://", "https://")):
        host = f"http://{host}"
    return f"{host}/{namespace}/{service}/v1/chat/completions"


def chat_request(model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    if not 1 <= max_tokens <= 4096:
        raise InputError("max_tokens", f"must be between 1 and 4096, got {max_tokens}")
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }


def first_tokens(text: str) -> str:
    words = text.split()
    head = " ".join(words[:ANSWER_WORDS])
    if len(head) > ANSWER_CHARS:
        head = head[: ANSWER_CHARS - 3].rstrip() + "..."
    elif len(words) > ANSWER_WORDS:
        head += " ..."
    return head


def openai_answer(body: str) -> dict[str, Any]:
    """The answer of an OpenAI chat completion body; ApiError naming what is missing otherwise."""

    def refuse(what: str) -> ApiError:
        return ApiError(
            f"the answer is not an OpenAI chat completion: {what}; it starts: {body[:BODY_HEAD]!r}",
            details={"body_head": body[:BODY_HEAD]},
        )

    try:
        data = json.loads(body)
    except ValueError:
        raise refuse("not JSON") from None
    if not isinstance(data, Mapping):
        raise refuse("not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise refuse("no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
        raise refuse("no choices[0].message.content string")
    if data.get("object") not in (None, "chat.completion"):
        raise refuse(f"object is {data.get('object')!r}, not 'chat.completion'")
    text = message["content"]
    return {
        "text": text,
        "first_tokens": first_tokens(text),
        "finish_reason": choices[0].get("finish_reason"),
        "model": data.get("model"),
        "id": data.get("id"),
    }


def condition_text(obj: Mapping[str, Any] | None, kind: str) -> str:
    cond = plan.conditions_summary(obj).get(kind)
    if cond is None:
        return f"condition {kind} not reported"
    detail = "; ".join(str(cond[k]) for k in ("reason", "message") if cond.get(k))
    return f"condition {kind}={cond.get('status')}" + (f" ({detail})" if detail else "")


def is_true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    return (plan.conditions_summary(obj).get(kind) or {}).get("status") == "True"


def replica_cluster(replica: Mapping[str, Any]) -> str | None:
    return (replica.get("spec") or {}).get("clusterName") or ((replica.get("metadata") or {}).get("labels") or {}).get(
        "modelplane.ai/cluster"
    )


def pod_diagnosis(replica: str, pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    """Which workload pod serves ``replica`` (by name prefix) and its last event, in one line."""
    mine = [p for p in pods if str((p.get("metadata") or {}).get("name", "")).startswith(replica)]
    if not mine:
        return f"no pod named {replica}-* in namespace {WORKLOAD_NAMESPACE} of the workload cluster"
    parts = []
    for pod in mine:
        pod_name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        waiting = [
            (c.get("state") or {}).get("waiting") or {}
            for c in status.get("containerStatuses") or []
            if (c.get("state") or {}).get("waiting")
        ]
        reason = "; ".join(f"{w.get('reason')}: {w.get('message', '')}".strip(": ") for w in waiting)
        own = [e for e in events if (e.get("involvedObject") or {}).get("name") == pod_name]
        own.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
        last = f", last event {own[-1].get('reason')}: {own[-1].get('message')}" if own else ", no events"
        parts.append(f"pod {pod_name} {status.get('phase', '?')}{f' ({reason})' if reason else ''}{last}")
    return "; ".join(parts)


def http_post(url: str, body: dict[str, Any], timeout: float) -> tuple[int, str]:
    """POST JSON; (status, text). Raises OSError when no HTTP answer came (refused, reset, timed out)."""
    try:
        with open_url(
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            timeout=timeout,
        ) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except UrlsConnectionError as exc:  # ansible's wrapper of a failed connection (TLS, proxy): no HTTP answer
        raise OSError(str(exc)) from exc


# ---- the run --------------------------------------------------------------------------------------


def connect(params: Mapping[str, Any], which: str) -> Any:
    from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.adoption import (
        connect as adoption_connect,
    )

    return adoption_connect(params, which)


def run_modelplane_smoke(
    module: Any,
    connector: Connect | None = None,
    post: Post | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    params = module.params
    if connector is None:
        module.require("kubernetes", KUBERNETES_IMPORT_ERROR)
        connector = connect
    if not params.get("kubeconfig"):
        raise InputError("kubeconfig", "the control plane's kubeconfig is required (or set MODELPLANE_KUBECONFIG)")
    cluster = validate.dns_label("cluster", params.get("cluster"))
    wait_timeout_seconds(params)
    smoke = Smoke(module, cluster, connector, post or http_post, clock=clock, sleep=sleep)
    if (params.get("state") or "present") == "absent":
        return smoke.absent()
    return smoke.present()


class Smoke:
    """One smoke test run: its inputs, the objects it wrote, what it did."""

    def __init__(
        self,
        module: Any,
        cluster: str,
        connector: Connect,
        post: Post,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.module = module
        self.params = module.params
        self.cluster = cluster
        self.connector = connector
        self.post = post
        self.clock = clock
        self.sleep = sleep
        self.check = bool(module.check_mode)
        self.timeout = float(wait_timeout_seconds(self.params))
        self.actions: list[str] = []
        self.leftovers: list[str] = []
        self.url: str | None = None  # the public URL, once the gateway's address is known

    # ---- inputs ---------------------------------------------------------------------------------

    def _inputs(self) -> dict[str, Any]:
        p = self.params
        model = (p.get("model") or "").strip()
        if not model:
            raise InputError("model", "is required with state=present: the model to serve (a Hugging Face repo id)")
        namespace = validate.dns_label("namespace", p.get("namespace") or "default")
        name = object_name(self.cluster, p.get("name"))
        # An explicit 0 is refused, not read as the default: "0 GPUs" is a mistake, never a request for one.
        gpus = 1 if p.get("gpus") is None else validate.integer("gpus", p["gpus"], minimum=1, maximum=MAX_DEVICE_COUNT)
        size = (
            0 if p.get("cache_size_gib") is None else validate.integer("cache_size_gib", p["cache_size_gib"], minimum=0)
        )
        served = (p.get("served_model_name") or model).strip()
        max_tokens = 32 if p.get("max_tokens") is None else validate.integer("max_tokens", p["max_tokens"], minimum=1)
        request = chat_request(served, p.get("prompt") or DEFAULT_PROMPT, max_tokens)
        return {
            "model": model,
            "served": served,
            "namespace": namespace,
            "name": name,
            "gpus": gpus,
            "cache_size_gib": size,
            "request": request,
        }

    # ---- present --------------------------------------------------------------------------------

    def present(self) -> dict[str, Any]:
        inputs = self._inputs()
        deadline = Deadline(self.timeout, clock=self.clock)
        control = self.connector(self.params, "control")
        try:
            gateway.require_gateway_api(control)
            if self.check and not self._serving(control):
                # A dry run whose adoption is planned, not done: nothing to plan against yet.
                self.actions.append(
                    f"run the smoke test once InferenceCluster {self.cluster} serves (a dry run does not adopt it)"
                )
                return {"changed": False, "actions": self.actions, "removed": [], "cluster": self.cluster}
            target, engine, objects = self._plan(control, inputs)
            self._remove(control, self._leftovers(control), leftover=True)
            if self.check:
                self.actions += [f"create {o['kind']} {inputs['namespace']}/{o['metadata']['name']}" for o in objects]
                self.actions.append(f"POST a chat completion, then delete the {len(objects)} objects again")
                return self._result(
                    inputs=inputs, target=target, engine=engine, objects=objects, replica=None, answer=None
                )
            gateway_obj = gateway.wait_gateway_ready(
                control, max(deadline.remaining(), 0.0), clock=self.clock, sleep=self.sleep
            )
            created: list[dict[str, Any]] = []
            failure: MetalplaneError | None = None
            answer = replica = None
            try:
                for obj in objects:
                    control.create(obj)
                    created.append(obj)
                replica = self._wait_scheduled(control, inputs, deadline)
                replica = self._wait_replica_ready(control, inputs, replica, deadline)
                self.url = chat_url(gateway.gateway_address(gateway_obj) or "", inputs["namespace"], inputs["name"])
                answer = self._chat(self.url, inputs["request"], deadline)
            except MetalplaneError as exc:
                failure = exc
            finally:
                if not self.params.get("keep_objects"):
                    try:
                        self._remove(control, created, leftover=False)
                    except MetalplaneError as exc:
                        if failure is None:
                            raise
                        failure.msg += f" (and removing the smoke objects failed: {exc.msg})"
            if failure is not None:
                raise failure
            if self.params.get("keep_objects"):
                self.actions += [f"kept {o['kind']} {inputs['namespace']}/{o['metadata']['name']}" for o in created]
            return self._result(
                inputs=inputs, target=target, engine=engine, objects=objects, replica=replica, answer=answer
            )
        finally:
            control.close()

    def _serving(self, control: Any) -> bool:
        ic = control.get(API_VERSION, KIND_INFERENCE_CLUSTER, self.cluster)
        return ic is not None and not readiness.unmet(ic)

    def _plan(self, control: Any, inputs: dict[str, Any]) -> tuple[Target, dict[str, Any], list[dict[str, Any]]]:
        """Everything checked and built before the first write."""
        ic = control.get(API_VERSION, KIND_INFERENCE_CLUSTER, self.cluster)
        if ic is None:
            raise NotFoundError(f"InferenceCluster {self.cluster!r} not found on the control plane: adopt it first")
        unmet = readiness.unmet(ic)
        if unmet:
            raise NotFoundError(
                f"InferenceCluster {self.cluster!r} is not serving, so nothing can be scheduled on it: "
                f"{'; '.join(unmet)}",
                details={"unmet": unmet},
            )
        if ((ic.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL) != self.cluster:
            raise NotFoundError(
                f"InferenceCluster {self.cluster!r} lacks the label {CLUSTER_LABEL}={self.cluster} that pins the smoke "
                "test to it: adopt it again with metalplane.inference.modelplane_cluster (which sets it)"
            )
        class_names = {str(p.get("className")) for p in (ic.get("spec") or {}).get("nodePools") or []}
        classes = {n: control.get(API_VERSION, KIND_INFERENCE_CLASS, n) for n in sorted(class_names)}
        target = choose_target(ic, classes, self.params.get("pool") or None)
        check_single_node(inputs["gpus"], target)
        if control.get("v1", "Namespace", inputs["namespace"]) is None:
            raise InputError(
                "namespace", f"{inputs['namespace']!r} does not exist on the control plane: create it first"
            )
        size = inputs["cache_size_gib"]
        if size and not ((ic.get("status") or {}).get("cache") or {}).get("storageClassName"):
            raise InputError(
                "cache_size_gib",
                f"InferenceCluster {self.cluster!r} has no cache StorageClass (status.cache.storageClassName), so no "
                "ModelCache can be staged there: set cache_size_gib to 0 or adopt it with storage_class_name",
            )
        engine = engines.engine_for(
            target.device,
            model=inputs["model"],
            served_model_name=inputs["served"],
            gpus=inputs["gpus"],
            image=self.params.get("image") or None,
            extra_args=self.params.get("engine_args") or [],
            cached=bool(size),
        )
        name, namespace = inputs["name"], inputs["namespace"]
        objects = []
        if size:
            objects.append(model_cache(name, namespace, self.cluster, model=inputs["model"], size_gib=size))
        objects.append(
            model_deployment(name, namespace, target, gpus=inputs["gpus"], engine=engine, cache=name if size else None)
        )
        objects.append(model_service(name, namespace, self.cluster, name))
        for obj in objects:
            live = control.get(API_VERSION, obj["kind"], name, namespace)
            if live is not None and not self._is_smoke(live):
                raise ConflictError(
                    f"{obj['kind']} {namespace}/{name} exists and is not this cluster's smoke test: "
                    "choose another name",
                    details={"kind": obj["kind"], "name": name},
                )
        return target, engine, objects

    def _is_smoke(self, obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in smoke_labels(self.cluster).items())

    def _leftovers(self, control: Any) -> list[dict[str, Any]]:
        """This cluster's smoke objects of an earlier run (any namespace), services first."""
        found = []
        for kind in (KIND_MODEL_SERVICE, KIND_MODEL_DEPLOYMENT, KIND_MODEL_CACHE):
            found += control.list(API_VERSION, kind, label_selector=smoke_selector(self.cluster))
        return found

    def _remove(self, control: Any, objects: list[dict[str, Any]], *, leftover: bool) -> None:
        """Delete (service, deployment, cache) and wait until the deployments' replicas are gone."""
        order = {KIND_MODEL_SERVICE: 0, KIND_MODEL_DEPLOYMENT: 1, KIND_MODEL_CACHE: 2}
        deployments = []
        for obj in sorted(objects, key=lambda o: order.get(o["kind"], 3)):
            meta = obj["metadata"]
            ref = f"{obj['kind']} {meta.get('namespace')}/{meta['name']}"
            if leftover:
                self.leftovers.append(ref)
                self.actions.append(f"delete leftover {ref}")
            if self.check:
                continue
            control.delete(API_VERSION, obj["kind"], meta["name"], meta.get("namespace"))
            if obj["kind"] == KIND_MODEL_DEPLOYMENT:
                deployments.append((meta.get("namespace"), meta["name"]))
        if not deployments:
            return

        def observe() -> Poll[list[str]]:
            left = []
            for namespace, name in deployments:
                for replica in control.list(
                    API_VERSION, KIND_MODEL_REPLICA, namespace=namespace, label_selector=f"{DEPLOYMENT_LABEL}={name}"
                ):
                    left.append(f"{namespace}/{replica['metadata']['name']}")
            return Poll(not left, left)

        wait_for(
            observe,
            timeout=self.timeout,
            what="the smoke test's ModelReplicas to be gone (the GPU freed)",
            backoff=POLL,
            clock=self.clock,
            sleep=self.sleep,
        )

    def _replicas(self, control: Any, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        return control.list(
            API_VERSION,
            KIND_MODEL_REPLICA,
            namespace=inputs["namespace"],
            label_selector=f"{DEPLOYMENT_LABEL}={inputs['name']}",
        )

    def _wait_scheduled(self, control: Any, inputs: Mapping[str, Any], deadline: Deadline) -> dict[str, Any]:
        ref = f"ModelDeployment {inputs['namespace']}/{inputs['name']}"

        def observe() -> Poll[dict[str, Any] | None]:
            for replica in self._replicas(control, inputs):
                placed = replica_cluster(replica)
                if placed == self.cluster:
                    return Poll(True, replica)
                if placed:
                    raise ConflictError(
                        f"{ref} was scheduled on InferenceCluster {placed!r}, not {self.cluster!r}: its "
                        f"clusterSelector {CLUSTER_LABEL}={self.cluster} must match this cluster only; check the "
                        "clusters' labels"
                    )
            return Poll(False, None)

        try:
            return wait_for(
                observe,
                timeout=deadline.remaining(),
                what=f"{ref} to be scheduled",
                backoff=POLL,
                clock=self.clock,
                sleep=self.sleep,
            )
        except WaitTimeout:
            md = control.get(API_VERSION, KIND_MODEL_DEPLOYMENT, inputs["name"], inputs["namespace"])
            raise WaitTimeout(
                f"not scheduled: {ref} has no replica on InferenceCluster {self.cluster!r} after {self.timeout:g}s: "
                f"{condition_text(md, 'ReplicasScheduled')}",
                last_seen={"ReplicasScheduled": condition_text(md, "ReplicasScheduled")},
            ) from None

    def _wait_replica_ready(
        self, control: Any, inputs: Mapping[str, Any], replica: dict[str, Any], deadline: Deadline
    ) -> dict[str, Any]:
        name = replica["metadata"]["name"]
        ref = f"ModelReplica {inputs['namespace']}/{name}"

        def observe() -> Poll[dict[str, Any] | None]:
            obj = control.get(API_VERSION, KIND_MODEL_REPLICA, name, inputs["namespace"])
            if obj is None:
                raise NotFoundError(f"{ref} disappeared while waiting for it to become Ready")
            return Poll(is_true(obj, "Ready"), obj)

        try:
            return wait_for(
                observe,
                timeout=deadline.remaining(),
                what=f"{ref} to be Ready",
                backoff=POLL,
                clock=self.clock,
                sleep=self.sleep,
            )
        except WaitTimeout as exc:
            pods = self._pod_diagnosis(name)
            raise WaitTimeout(
                f"not Ready: {ref} on InferenceCluster {self.cluster!r} after {self.timeout:g}s: "
                f"{condition_text(exc.last_seen, 'Ready')}; {pods}",
                last_seen={"Ready": condition_text(exc.last_seen, "Ready"), "pods": pods},
            ) from None

    def _pod_diagnosis(self, replica: str) -> str:
        if not self.params.get("workload_kubeconfig"):
            return "set workload_kubeconfig to name its pod and that pod's last event"
        try:
            workload = self.connector(self.params, "workload")
        except MetalplaneError as exc:
            return f"the workload cluster could not be asked for its pods ({exc.msg})"
        try:
            pods = workload.list("v1", "Pod", namespace=WORKLOAD_NAMESPACE)
            events = workload.list("v1", "Event", namespace=WORKLOAD_NAMESPACE)
        except MetalplaneError as exc:
            return f"the workload cluster's pods could not be listed ({exc.msg})"
        finally:
            workload.close()
        return pod_diagnosis(replica, pods, events)

    def _chat(self, url: str, body: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        timeout = float(self.params.get("api_timeout") or 120)
        last: dict[str, Any] = {}

        def observe() -> Poll[tuple[int, str] | None]:
            try:
                status, text = self.post(url, body, timeout)
            except OSError as exc:
                last.update(error=f"{exc.__class__.__name__}: {exc}")
                return Poll(False, None)
            if status in RETRY_STATUSES:
                last.update(status=status, body=text[:BODY_HEAD], error=None)
                return Poll(False, None)
            return Poll(True, (status, text))

        try:
            status, text = wait_for(
                observe,
                timeout=max(deadline.remaining(), 0.0),
                what=f"the gateway to route {url}",
                backoff=POLL,
                clock=self.clock,
                sleep=self.sleep,
            )
        except WaitTimeout:
            seen = last.get("error") or f"HTTP {last.get('status')}: {last.get('body')!r}"
            raise ApiError(
                f"the gateway kept refusing POST {url} until the deadline ({self.timeout:g}s); last answer: {seen}",
                details={"url": url, **{k: v for k, v in last.items() if v is not None}},
            ) from None
        if not 200 <= status < 300:
            raise ApiError(
                f"the gateway refused POST {url}: HTTP {status}: {text[:BODY_HEAD]!r}",
                status=status,
                details={"url": url, "body_head": text[:BODY_HEAD]},
            )
        return openai_answer(text)

    # ---- absent ---------------------------------------------------------------------------------

    def absent(self) -> dict[str, Any]:
        control = self.connector(self.params, "control")
        try:
            self._remove(control, self._leftovers(control), leftover=True)
        finally:
            control.close()
        return {"changed": bool(self.leftovers), "actions": self.actions, "removed": self.leftovers}

    # ---- result ---------------------------------------------------------------------------------

    def _result(
        self,
        *,
        inputs: Mapping[str, Any],
        target: Target,
        engine: Mapping[str, Any],
        objects: list[dict[str, Any]],
        replica: Mapping[str, Any] | None,
        answer: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        request = {
            "method": "POST",
            "url": self.url or f"http://<gateway>/{inputs['namespace']}/{inputs['name']}/v1/chat/completions",
            "body": inputs["request"],
        }
        result: dict[str, Any] = {
            "changed": bool(self.leftovers) or bool(self.params.get("keep_objects") and not self.check),
            "actions": self.actions,
            "removed": self.leftovers,
            "cluster": self.cluster,
            "pool": target.pool,
            "class_name": target.class_name,
            "engine": dict(engine),
            "objects": [f"{o['kind']} {inputs['namespace']}/{o['metadata']['name']}" for o in objects],
            "request": request,
            "replica": None
            if replica is None
            else {"name": replica["metadata"]["name"], "cluster": replica_cluster(replica), "ready": True},
            "answer": dict(answer) if answer is not None else None,
        }
        if answer is not None:
            # For the timeline callback: the request and the answer's first tokens, short strings only.
            result["smoke"] = {
                "request": f"POST {request['url']} model={inputs['served']}",
                "answer": answer["first_tokens"],
            }
        return result
