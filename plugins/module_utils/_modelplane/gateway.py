# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control plane's InferenceGateway: checked before anything is created, created once, never deleted by accident.

Why (source: https://github.com/modelplaneai/modelplane v0.3.1 at ``90ba117d``, the XRD
``apis/inferencegateways/definition.yaml`` and ``functions/compose-model-service``): every chat
completion a user sends goes to ``http://<gateway>/<namespace>/<service>/v1/...``, where
``<gateway>`` is the ``status.address`` of the control plane's one InferenceGateway. The ModelService
composition matches it by the name ``default``, so there is exactly one per control plane, shared by
every InferenceCluster. Hence:

- a missing or unready gateway is a preflight failure (an adopted cluster nobody can reach is not
  "inference-ready"), unless the inventory asks this collection to manage it (``manage``);
- a managed gateway is created once per control plane (the first cluster's run creates it, the others
  find it) with the backend the inventory names, and updated only when it carries this collection's
  ``app.kubernetes.io/managed-by`` label;
- no cluster's teardown deletes it; ``state=absent`` deletes it only when this collection created it.

The spec follows the XRD: ``backend`` (only ``Traefik`` at v0.3.1) and ``traefik.version`` are
required, ``traefik.loadBalancer: MetalLB`` needs ``traefik.metallb.addressPool`` (a CEL rule only a
real API server checks, so it is checked here too). Readiness is Crossplane's ``Ready=True`` plus a
non-empty ``status.address``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_seconds
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    InputError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KUBERNETES_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import plan
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    API_VERSION,
    GATEWAY_NAME,
    KIND_INFERENCE_GATEWAY,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
)

# The CRD Crossplane generates from the XRD; its absence means "no Modelplane gateway API here".
GATEWAY_CRD = "inferencegateways.modelplane.ai"
CRD_API = "apiextensions.k8s.io/v1"
# spec.backend's enum and spec.traefik.loadBalancer's enum in the v0.3.1 XRD.
BACKENDS = ("Traefik",)
LOAD_BALANCERS = ("MetalLB",)
# The Traefik chart version Modelplane's own examples pin (docs/manifests/getting-started/inference-gateway.yaml).
DEFAULT_TRAEFIK_VERSION = "40.2.0"
# Polling the gateway while Traefik is installed: quick first (a re-run, the lab), then every 5 s.
POLL = Backoff(initial=0.5, cap=5.0, factor=1.5, jitter=0.1)
WRITE_ATTEMPTS = 4

Connect = Callable[[Mapping[str, Any], str], Any]


def inference_gateway(
    *,
    backend: str = "Traefik",
    traefik_version: str | None = DEFAULT_TRAEFIK_VERSION,
    load_balancer: str | None = None,
    metallb_address_pool: str | None = None,
) -> dict[str, Any]:
    """The singleton ``InferenceGateway default`` for the given backend (raises InputError on a bad one)."""
    if backend not in BACKENDS:
        raise InputError("backend", f"{backend!r} is not a gateway backend Modelplane offers: use one of {BACKENDS}")
    version = (traefik_version or "").strip()
    if not version:
        raise InputError("traefik_version", "is required with backend Traefik (the Traefik Helm chart version)")
    traefik: dict[str, Any] = {"version": version}
    if load_balancer:
        if load_balancer not in LOAD_BALANCERS:
            raise InputError(
                "load_balancer",
                f"{load_balancer!r} is not supported: use {LOAD_BALANCERS[0]} (bare metal, kind), or leave it empty "
                "where the control plane has a native LoadBalancer",
            )
        pool = (metallb_address_pool or "").strip()
        if not pool:
            raise InputError(
                "metallb_address_pool",
                "is required with load_balancer MetalLB: an address range of the control plane's network, "
                "e.g. 172.18.255.200-172.18.255.250",
            )
        traefik.update(loadBalancer=load_balancer, metallb={"addressPool": pool})
    elif metallb_address_pool:
        raise InputError("metallb_address_pool", "is only used with load_balancer MetalLB: set it, or drop the pool")
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_INFERENCE_GATEWAY,
        "metadata": {"name": GATEWAY_NAME, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        "spec": {"backend": backend, "traefik": traefik},
    }


def gateway_unmet(obj: Mapping[str, Any] | None) -> list[str]:
    """What the observed gateway still lacks to carry traffic (empty: Ready with an address)."""
    if obj is None:
        return [f"InferenceGateway {GATEWAY_NAME!r} not found"]
    problems = []
    ready = plan.conditions_summary(obj).get("Ready")
    if ready is None:
        problems.append("condition Ready not reported yet")
    elif ready.get("status") != "True":
        detail = "; ".join(str(ready[k]) for k in ("reason", "message") if ready.get(k))
        problems.append(f"condition Ready is {ready.get('status')} ({detail or 'no reason'})")
    if not ((obj.get("status") or {}).get("address")):
        problems.append("status.address is empty")
    return problems


def gateway_address(obj: Mapping[str, Any] | None) -> str | None:
    return ((obj or {}).get("status") or {}).get("address") or None


def gateway_differs(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    return desired.get("spec") != live.get("spec") or bool(plan.missing_labels(desired, live))


def updated_gateway(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """The live object (resourceVersion, others' labels and ``spec.crossplane``) with our spec fields."""
    meta = copy.deepcopy(dict(live.get("metadata") or {}))
    meta["labels"] = {**(meta.get("labels") or {}), **desired["metadata"]["labels"]}
    spec = {k: v for k, v in (live.get("spec") or {}).items() if k not in ("backend", "traefik")}
    spec.update(copy.deepcopy(desired["spec"]))
    out = {**copy.deepcopy(dict(live)), "metadata": meta, "spec": spec}
    out.pop("status", None)
    return out


def gateway_result(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    unmet = gateway_unmet(obj)
    return {
        "name": GATEWAY_NAME,
        "exists": obj is not None,
        "ready": obj is not None and not unmet,
        "address": gateway_address(obj),
        "managed": obj is not None and plan.is_ours(obj),
        "backend": ((obj or {}).get("spec") or {}).get("backend"),
        "unmet": unmet if obj is not None else [],
    }


def connect(params: Mapping[str, Any], _which: str = "control") -> Any:
    from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.adoption import (
        connect as adoption_connect,
    )

    return adoption_connect(params, "control")


def require_gateway_api(control: Any) -> None:
    """Fail, naming the CRD, when the control plane does not serve InferenceGateways."""
    if control.get(CRD_API, "CustomResourceDefinition", GATEWAY_CRD) is None:
        raise NotFoundError(
            f"the control plane serves no {GATEWAY_CRD} CRD: install Modelplane (v0.3.1 or later) there, or point "
            "kubeconfig (modelplane_kubeconfig) at its control plane",
            details={"crd": GATEWAY_CRD},
        )


def wait_gateway_ready(
    control: Any,
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Until ``InferenceGateway default`` is Ready with an address; on timeout, say what it lacks."""

    def observe() -> Poll[dict[str, Any] | None]:
        obj = control.get(API_VERSION, KIND_INFERENCE_GATEWAY, GATEWAY_NAME)
        return Poll(obj is not None and not gateway_unmet(obj), obj)

    try:
        return wait_for(
            observe,
            timeout=timeout,
            what=f"InferenceGateway {GATEWAY_NAME!r} to be Ready with an address",
            backoff=POLL,
            clock=clock,
            sleep=sleep,
        )
    except WaitTimeout as exc:
        unmet = gateway_unmet(exc.last_seen)
        raise WaitTimeout(
            f"InferenceGateway {GATEWAY_NAME!r} did not become Ready within {timeout:g}s: {'; '.join(unmet)}",
            last_seen={"unmet": unmet},
        ) from None


def run_modelplane_gateway(
    module: Any,
    connector: Connect | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The module: check (``manage=false``), create or update (``manage=true``), or delete ours (``absent``)."""
    params = module.params
    if connector is None:
        module.require("kubernetes", KUBERNETES_IMPORT_ERROR)
        connector = connect
    if not params.get("kubeconfig"):
        raise InputError("kubeconfig", "the control plane's kubeconfig is required (or set MODELPLANE_KUBECONFIG)")
    timeout = float(wait_timeout_seconds(params))
    state = params.get("state") or "present"
    manage = bool(params.get("manage"))
    desired = None
    if state == "present" and manage:
        desired = inference_gateway(
            backend=params.get("backend") or "Traefik",
            traefik_version=params.get("traefik_version"),
            load_balancer=params.get("load_balancer") or None,
            metallb_address_pool=params.get("metallb_address_pool") or None,
        )
    check = bool(module.check_mode)
    actions: list[str] = []
    diff: dict[str, Any] = {"before": {}, "after": {}}
    control = connector(params, "control")
    try:
        require_gateway_api(control)
        live = control.get(API_VERSION, KIND_INFERENCE_GATEWAY, GATEWAY_NAME)
        diff["before"] = _view(live)
        if state == "absent":
            observed = _absent(module, control, live, actions, check=check, timeout=timeout, clock=clock, sleep=sleep)
            diff["after"] = _view(observed)
        else:
            observed = _present(control, live, desired, actions, check=check)
            diff["after"] = _view(observed if desired is None or observed is not None else desired)
            # Waiting only reads, so a dry run waits too. Without a wait, an unmanaged gateway must be Ready now
            # (the preflight's question); a managed one may still be coming up.
            if observed is not None and params.get("wait", True):
                observed = wait_gateway_ready(control, timeout, clock=clock, sleep=sleep)
            elif observed is not None and not manage:
                unmet = gateway_unmet(observed)
                if unmet:
                    raise NotFoundError(
                        f"InferenceGateway {GATEWAY_NAME!r} on the control plane is not Ready: {'; '.join(unmet)}. "
                        "Every chat completion goes through it: fix it (its conditions say what is wrong) before "
                        "adopting clusters",
                        details={"gateway": GATEWAY_NAME, "unmet": unmet},
                    )
    finally:
        control.close()
    result: dict[str, Any] = {"changed": bool(actions), "actions": actions, "gateway": gateway_result(observed)}
    if module.diff_mode:
        result["diff"] = diff
    return result


def _present(
    control: Any, live: dict[str, Any] | None, desired: dict[str, Any] | None, actions: list[str], *, check: bool
) -> dict[str, Any] | None:
    if live is None:
        if desired is None:
            raise NotFoundError(
                f"InferenceGateway {GATEWAY_NAME!r} not found on the control plane: every chat completion goes "
                f"through it (http://<its address>/<namespace>/<service>/v1/...). Create it (backend Traefik, see "
                "Modelplane's getting-started guide), or set modelplane_gateway_manage: true (module option manage) "
                "to have this collection create it",
                details={"gateway": GATEWAY_NAME},
            )
        actions.append(f"create InferenceGateway {GATEWAY_NAME}")
        if check:
            return None
        try:
            return control.create(desired)
        except ApiError as exc:
            if exc.status != 409:
                raise
            live = control.get(API_VERSION, KIND_INFERENCE_GATEWAY, GATEWAY_NAME)  # another cluster's run was first
            actions.pop()
            if live is None:
                raise
    if desired is None or not plan.is_ours(live) or not gateway_differs(desired, live):
        return live
    actions.append(f"update InferenceGateway {GATEWAY_NAME}")
    if check:
        return live
    for _attempt in range(WRITE_ATTEMPTS):
        try:
            return control.replace(updated_gateway(desired, live))
        except ApiError as exc:
            if exc.status != 409:
                raise
            live = control.get(API_VERSION, KIND_INFERENCE_GATEWAY, GATEWAY_NAME)
            if live is None or not gateway_differs(desired, live):
                actions.pop()
                return live
    raise ApiError(f"InferenceGateway {GATEWAY_NAME!r} kept changing under this run; run it again", status=409)


def _absent(
    module: Any,
    control: Any,
    live: dict[str, Any] | None,
    actions: list[str],
    *,
    check: bool,
    timeout: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> dict[str, Any] | None:
    if live is None:
        return None
    if not plan.is_ours(live):
        module.warn(
            f"InferenceGateway {GATEWAY_NAME!r} was not created by {MANAGED_BY_VALUE} (no {MANAGED_BY_LABEL} label); "
            "left in place"
        )
        return live
    actions.append(f"delete InferenceGateway {GATEWAY_NAME}")
    if check:
        return live
    control.delete(API_VERSION, KIND_INFERENCE_GATEWAY, GATEWAY_NAME)

    def observe() -> Poll[dict[str, Any] | None]:
        obj = control.get(API_VERSION, KIND_INFERENCE_GATEWAY, GATEWAY_NAME)
        return Poll(obj is None, obj)

    wait_for(
        observe,
        timeout=timeout,
        what=f"InferenceGateway {GATEWAY_NAME!r} to be deleted",
        backoff=POLL,
        clock=clock,
        sleep=sleep,
    )
    return None


def _view(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    if obj is None:
        return {}
    meta = obj.get("metadata") or {}
    return {"labels": dict(meta.get("labels") or {}), "spec": copy.deepcopy(dict(obj.get("spec") or {}))}
