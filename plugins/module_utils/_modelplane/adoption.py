# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopt a workload cluster into Modelplane (``source: Existing``), or take it out again.

Why in this order (source: https://github.com/modelplaneai/modelplane v0.3.1 at ``90ba117d``,
``functions/compose-inference-cluster``, which composes the ClusterUsage, ClusterProviderConfig and ServingStack):

- present: the kubeconfig Secret, then the InferenceClasses, then the InferenceCluster. The cluster
  reports ``WaitingForClasses`` until every ``className`` resolves, and cannot install its serving
  stack without the Secret, so writing it last makes the first reconcile the successful one. Then
  wait for ``Ready``, ``ClusterReady``, ``BackendReady`` and ``status.gateway.address``
  (``readiness.unmet``).
- absent: refuse while ModelReplicas are pinned to the cluster (Modelplane's ClusterUsage would hold
  the deletion forever) unless a drain is asked for; delete the InferenceCluster in the foreground and
  wait until it is gone; only then delete the Secret (Modelplane needs the kubeconfig to uninstall
  the serving stack) and the classes no other cluster uses.

Many clusters may be adopted in parallel against one control plane, sharing classes: a class that
appeared meanwhile is compared instead of failing (409 on create), updates carry the
``resourceVersion`` and are retried on 409, a class is only deleted when no other InferenceCluster
names it (and a 404 is fine), and a class deleted by another run while this one waits is created
again.

Secrets: the workload kubeconfig is read from a file, masked with ``no_log`` for the whole run, and
appears in no result, diff, warning or message (the Secret's data is shown as ``<redacted>``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_timeout_seconds
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import (
    ApiError,
    ConflictError,
    InputError,
    NotFoundError,
    WaitTimeout,
)
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for
from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KUBERNETES_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import plan, readiness, validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    API_VERSION,
    CLUSTER_LABEL,
    CONTROL_PLANE_NAMESPACE,
    KIND_INFERENCE_CLASS,
    KIND_INFERENCE_CLUSTER,
)
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.kubeconfig_secret import (
    YAML_IMPORT_ERROR,
    kubeconfig_secret,
)

KIND_MODEL_REPLICA = "ModelReplica"
SECRET_API = "v1"
NODE_API = "v1"
# How often an update that lost a race (409 on a stale resourceVersion) is read and tried again.
WRITE_ATTEMPTS = 4
# Polling the InferenceCluster while it converges or goes away: quick at first (the lab and a
# re-run are fast), then every 5 s (a real serving stack takes minutes).
POLL = Backoff(initial=0.5, cap=5.0, factor=1.5, jitter=0.1)
# Replicas named in a refusal message (the full list is in the error details).
MESSAGE_REPLICAS = 10
FOREGROUND = "Foreground"

Connect = Callable[[Mapping[str, Any], str], Any]


def connect(params: Mapping[str, Any], which: str) -> Any:
    """A ``KubeObjects`` for the control plane (``which="control"``) or the workload cluster."""
    from ansible_collections.metalplane.inference.plugins.module_utils._kube.client import KubeClient
    from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.control import KubeObjects

    if which == "control":
        auth = {"kubeconfig": params["kubeconfig"], "context": params.get("context")}
        if params.get("validate_certs") is not None:
            auth["validate_certs"] = params["validate_certs"]
    else:
        auth = {"kubeconfig": params["workload_kubeconfig"]}
    return KubeObjects(KubeClient.from_auth({k: v for k, v in auth.items() if v is not None}))


def run_modelplane_cluster(
    module: Any,
    connector: Connect | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The module: ``state: present`` adopts, ``absent`` un-adopts (clock and sleep injectable for tests)."""
    params = module.params
    if connector is None:
        module.require("kubernetes", KUBERNETES_IMPORT_ERROR)
        module.require("PyYAML", YAML_IMPORT_ERROR)
        connector = connect
    name = validate.dns_label("name", params.get("name"))
    if not params.get("kubeconfig"):
        raise InputError("kubeconfig", "the control plane's kubeconfig is required (or set MODELPLANE_KUBECONFIG)")
    wait_timeout_seconds(params)  # validated before any request
    adoption = Adoption(module, name, connector, clock=clock, sleep=sleep)
    if params.get("state", "present") == "present":
        return adoption.present()
    return adoption.absent()


class Adoption:
    """One run of the module: the desired objects, the live ones, and what was done."""

    def __init__(
        self,
        module: Any,
        name: str,
        connector: Connect,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.module = module
        self.clock = clock
        self.sleep = sleep
        self.params = module.params
        self.name = name
        self.connector = connector
        self.check = bool(module.check_mode)
        self.timeout = float(wait_timeout_seconds(self.params))
        self.actions: list[str] = []
        self.before: dict[str, Any] = {"secret": {}, "classes": {}, "cluster": {}}
        self.after: dict[str, Any] = {"secret": {}, "classes": {}, "cluster": {}}
        self.class_results: list[dict[str, Any]] = []

    # ---- inputs ---------------------------------------------------------------------------------

    def _workload_kubeconfig(self) -> str:
        path = self.params.get("workload_kubeconfig")
        if not path:
            raise InputError("workload_kubeconfig", "is required with state=present (path of the workload kubeconfig)")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError("workload_kubeconfig", f"cannot read {path}: {exc.__class__.__name__}") from None
        self.module.log_secret(text)
        return text

    def _desired_secret(self, kubeconfig: str) -> dict[str, Any]:
        secret = kubeconfig_secret(
            plan.secret_name_for(self.name, self.params.get("secret_name")),
            kubeconfig,
            cluster=self.name,
            server=self.params.get("server") or None,
            tls_server_name=self.params.get("tls_server_name") or None,
        )
        for value in secret["data"].values():
            self.module.log_secret(value)
        return secret

    def _node_pool_of(self, inventory: Any) -> dict[str, str]:
        """Node -> pool label, read from the workload cluster only when the inventory does not say."""
        if not plan.nodes_without_pool(inventory):
            return {}
        workload = self.connector(self.params, "workload")
        try:
            return plan.node_pool_labels(workload.list(NODE_API, "Node"))
        finally:
            workload.close()

    def _desired_classes(self, pools: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """(generated or given classes, names of classes that must already exist)."""
        classes = plan.explicit_classes(self.params.get("classes"))
        sources = plan.class_sources(pools, classes)
        inventory = self.params.get("gpu_inventory")
        if not sources:
            return classes, []
        if inventory in (None, {}, []):
            return classes, sorted(sources)
        grouped = plan.inventory_pools(inventory, self._node_pool_of(inventory))
        classes.update(plan.generated_classes(sources, grouped))
        return classes, []

    # ---- present --------------------------------------------------------------------------------

    def present(self) -> dict[str, Any]:
        pools = plan.node_pools(self.params.get("node_pools"))
        storage_class = self.params.get("storage_class_name")
        cluster = plan.desired_cluster(
            self.name,
            secret_name=plan.secret_name_for(self.name, self.params.get("secret_name")),
            pools=pools,
            storage_class_name=storage_class if storage_class != "" else None,
            labels=self.params.get("labels"),
            taints=self.params.get("taints"),
        )
        secret = self._desired_secret(self._workload_kubeconfig())
        classes, referenced = self._desired_classes(pools)

        control = self.connector(self.params, "control")
        try:
            live_cluster = control.get(API_VERSION, KIND_INFERENCE_CLUSTER, self.name)
            plan.check_cluster_owner(self.name, live_cluster)
            secret_name = secret["metadata"]["name"]
            live_secret = control.get(SECRET_API, "Secret", secret_name, CONTROL_PLANE_NAMESPACE)
            plan.check_secret_owner(secret_name, self.name, live_secret)
            live_classes = {n: control.get(API_VERSION, KIND_INFERENCE_CLASS, n) for n in [*classes, *referenced]}
            for class_name, desired in classes.items():
                plan.check_class_owner(desired, live_classes[class_name])
            missing = [n for n in referenced if live_classes[n] is None]
            if missing:
                raise NotFoundError(
                    f"InferenceClass {', '.join(missing)} not found: give it in classes, or gpu_inventory to "
                    "generate it from the nodes",
                    details={"classes": missing},
                )

            self._apply_secret(control, secret, live_secret)
            for class_name, desired in classes.items():
                self._apply_class(control, desired, live_classes[class_name])
            for class_name in referenced:
                self.class_results.append({"name": class_name, "action": "used", "managed": False})
            observed = self._apply_cluster(control, cluster, live_cluster)
            all_classes = {**{n: live_classes[n] for n in referenced}, **classes}
            if self.params.get("wait", True) and not self.check:
                observed = self._wait_ready(control, classes)
        finally:
            control.close()
        return self._result(observed, pools, all_classes)

    def _apply_secret(self, control: Any, desired: dict[str, Any], live: dict[str, Any] | None) -> None:
        name = desired["metadata"]["name"]
        if live is None:
            self.actions.append(f"create Secret {CONTROL_PLANE_NAMESPACE}/{name}")
            self.after["secret"] = plan.secret_view(desired, data_changed=True)
            if not self.check:
                control.create(desired)
            return
        changed = plan.secret_differs(desired, live)
        self.before["secret"] = plan.secret_view(live)
        self.after["secret"] = plan.secret_view(desired, data_changed=(live.get("data") or {}) != desired["data"])
        if changed:
            self.actions.append(f"update Secret {CONTROL_PLANE_NAMESPACE}/{name}")
            if not self.check:
                self._replace(
                    control,
                    desired,
                    live,
                    merge=plan.updated_secret,
                    differs=plan.secret_differs,
                    api_version=SECRET_API,
                    kind="Secret",
                )

    def _apply_class(self, control: Any, desired: dict[str, Any], live: dict[str, Any] | None) -> None:
        name = desired["metadata"]["name"]
        self.before["classes"][name] = plan.class_view(live)
        self.after["classes"][name] = plan.class_view(desired)
        action = "unchanged"
        if live is None:
            action = "created"
            if not self.check:
                try:
                    control.create(desired)
                except ApiError as exc:
                    if exc.status != 409:
                        raise
                    # Another run (another cluster of the same play) created it first.
                    action = self._converge_class(control, desired)
        elif plan.class_differs(desired, live) or (plan.is_ours(live) and plan.missing_labels(desired, live)):
            action = "updated"
            if not self.check:
                action = self._converge_class(control, desired)
        if action != "unchanged":
            self.actions.append(f"{action[:-1]} InferenceClass {name}")
        self.class_results.append({"name": name, "action": action, "managed": live is None or plan.is_ours(live)})

    def _converge_class(self, control: Any, desired: dict[str, Any]) -> str:
        name = desired["metadata"]["name"]
        live = control.get(API_VERSION, KIND_INFERENCE_CLASS, name)
        if live is None:
            control.create(desired)
            return "created"
        plan.check_class_owner(desired, live)
        if not plan.class_differs(desired, live) and not (plan.is_ours(live) and plan.missing_labels(desired, live)):
            return "unchanged"
        self._replace(
            control,
            desired,
            live,
            merge=plan.updated_class,
            differs=_class_or_labels_differ,
            api_version=API_VERSION,
            kind=KIND_INFERENCE_CLASS,
        )
        return "updated"

    def _apply_cluster(self, control: Any, desired: dict[str, Any], live: dict[str, Any] | None) -> dict[str, Any]:
        self.before["cluster"] = plan.cluster_view(live)
        self.after["cluster"] = plan.cluster_view(desired if live is None else plan.updated_cluster(desired, live))
        if live is None:
            self.actions.append(f"create InferenceCluster {self.name}")
            if self.check:
                return {}
            return control.create(desired)
        if not plan.cluster_differs(desired, live):
            return live
        self.actions.append(f"update InferenceCluster {self.name}")
        if self.check:
            return live
        return self._replace(
            control,
            desired,
            live,
            merge=plan.updated_cluster,
            differs=plan.cluster_differs,
            api_version=API_VERSION,
            kind=KIND_INFERENCE_CLUSTER,
        )

    def _replace(
        self,
        control: Any,
        desired: dict[str, Any],
        live: dict[str, Any],
        *,
        merge: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]],
        differs: Callable[[Mapping[str, Any], Mapping[str, Any]], bool],
        api_version: str,
        kind: str,
    ) -> dict[str, Any]:
        """PUT ``merge(desired, live)``; on 409 read again and retry while it still differs."""
        meta = desired["metadata"]
        for attempt in range(WRITE_ATTEMPTS):
            try:
                return control.replace(merge(desired, live))
            except ApiError as exc:
                if exc.status != 409 or attempt == WRITE_ATTEMPTS - 1:
                    raise
            fresh = control.get(api_version, kind, meta["name"], meta.get("namespace"))
            if fresh is None:
                return control.create(desired)
            if not differs(desired, fresh):
                return fresh
            live = fresh
        raise ConflictError(f"{kind} {meta['name']} kept changing while being updated")  # pragma: no cover

    def _wait_ready(self, control: Any, classes: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        def observe() -> Poll[dict[str, Any] | None]:
            try:
                obj = control.get(API_VERSION, KIND_INFERENCE_CLUSTER, self.name)
            except ApiError:  # a control plane restarting: keep polling until the deadline
                return Poll(False, None)
            problems = readiness.unmet(obj)
            if problems and _waiting_for_classes(obj):
                # A parallel un-adopt of another cluster may have deleted a shared class just now.
                for desired in classes.values():
                    self._recreate_class(control, desired)
            return Poll(not problems, obj)

        try:
            return wait_for(
                observe,
                timeout=self.timeout,
                what=f"InferenceCluster {self.name!r} to be ready",
                backoff=POLL,
                clock=self.clock,
                sleep=self.sleep,
            )
        except WaitTimeout as exc:
            last = exc.last_seen
            raise WaitTimeout(
                f"InferenceCluster {self.name!r} not ready after {self.timeout:g}s: "
                + "; ".join(readiness.unmet(last) if last is not None else ["the control plane did not answer"]),
                last_seen=_conditions(last),
                details={"cluster": _cluster_result(self.name, last)},
            ) from None

    def _recreate_class(self, control: Any, desired: dict[str, Any]) -> None:
        name = desired["metadata"]["name"]
        if control.get(API_VERSION, KIND_INFERENCE_CLASS, name) is not None:
            return
        try:
            control.create(desired)
        except ApiError as exc:
            if exc.status != 409:
                raise
        self.module.warn(f"InferenceClass {name} disappeared while the cluster converged and was created again")

    def _result(
        self, observed: dict[str, Any] | None, pools: list[dict[str, Any]], classes: Mapping[str, Any]
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "changed": bool(self.actions),
            "actions": self.actions,
            "cluster": _cluster_result(self.name, observed or None),
            "classes": self.class_results,
            "pools": plan.pools_view(pools, classes),
            "secret": {
                "name": plan.secret_name_for(self.name, self.params.get("secret_name")),
                "namespace": CONTROL_PLANE_NAMESPACE,
            },
            "drained": [],
        }
        if self.module.diff_mode:
            result["diff"] = {"before": _prune(self.before), "after": _prune(self.after)}
        return result

    # ---- absent ---------------------------------------------------------------------------------

    def absent(self) -> dict[str, Any]:
        control = self.connector(self.params, "control")
        drained: list[str] = []
        try:
            live = control.get(API_VERSION, KIND_INFERENCE_CLUSTER, self.name)
            plan.check_cluster_owner(self.name, live)
            replicas = self._replicas(control)
            refs = plan.replica_refs(replicas, self.name)
            if refs and live is not None and not self.params.get("drain"):
                shown = ", ".join(refs[:MESSAGE_REPLICAS]) + (" ..." if len(refs) > MESSAGE_REPLICAS else "")
                raise ConflictError(
                    f"{len(refs)} ModelReplica(s) still target InferenceCluster {self.name!r} ({shown}); "
                    "move them away first or set drain=true to delete them",
                    details={"cluster": self.name, "model_replicas": refs},
                )
            secret_name = self._secret_name(live)
            live_secret = control.get(SECRET_API, "Secret", secret_name, CONTROL_PLANE_NAMESPACE)
            candidates = self._class_candidates(live)
            self.before["cluster"] = plan.cluster_view(live)
            self.before["secret"] = plan.secret_view(live_secret) if plan.is_ours(live_secret) else {}

            if live is not None and refs:
                drained = self._drain(control, live, refs)
            if live is not None:
                self.actions.append(f"delete InferenceCluster {self.name}")
                if not self.check:
                    control.delete(API_VERSION, KIND_INFERENCE_CLUSTER, self.name, propagation=FOREGROUND)
                    self._wait_gone(control)
            self._delete_secret(control, secret_name, live_secret)
            self._delete_classes(control, candidates)
        finally:
            control.close()
        result: dict[str, Any] = {
            "changed": bool(self.actions),
            "actions": self.actions,
            "cluster": _cluster_result(self.name, None),
            "classes": self.class_results,
            "pools": [],
            "secret": {"name": secret_name, "namespace": CONTROL_PLANE_NAMESPACE},
            "drained": drained,
        }
        if self.module.diff_mode:
            result["diff"] = {"before": _prune(self.before), "after": {}}
        return result

    def _secret_name(self, live: Mapping[str, Any] | None) -> str:
        ref = ((((live or {}).get("spec") or {}).get("cluster") or {}).get("existing") or {}).get("secretRef") or {}
        return str(self.params.get("secret_name") or ref.get("name") or plan.secret_name_for(self.name, None))

    def _class_candidates(self, live: Mapping[str, Any] | None) -> list[str]:
        """Classes this cluster used (live) or names in the options: ours are deleted when unused."""
        names = plan.referenced_classes(live)
        for entry in self.params.get("classes") or []:
            if isinstance(entry, Mapping) and entry.get("name"):
                names.append(str(entry["name"]))
        for entry in self.params.get("node_pools") or []:
            if isinstance(entry, Mapping):
                names.append(str(entry.get("class_name") or entry.get("name") or ""))
        return sorted({n for n in names if n})

    def _replicas(self, control: Any) -> list[dict[str, Any]]:
        return control.list(API_VERSION, KIND_MODEL_REPLICA)

    def _drain(self, control: Any, live: dict[str, Any], refs: list[str]) -> list[str]:
        """Taint the cluster NoExecute (no new placements), then delete its replicas and wait for them."""
        tainted = plan.with_taint(live, plan.DRAIN_TAINT)
        if tainted is not None:
            self.actions.append(f"taint InferenceCluster {self.name} {plan.DRAIN_TAINT['key']}:NoExecute")
            if not self.check:
                self._replace(
                    control,
                    tainted,
                    live,
                    merge=_keep_fresh_with_taint,
                    differs=_lacks_taint,
                    api_version=API_VERSION,
                    kind=KIND_INFERENCE_CLUSTER,
                )
        for ref in refs:
            namespace, _sep, replica = ref.partition("/")
            self.actions.append(f"delete ModelReplica {ref}")
            if not self.check:
                control.delete(API_VERSION, KIND_MODEL_REPLICA, replica, namespace or None)
        if not self.check:

            def observe() -> Poll[list[str]]:
                left = plan.replica_refs(self._replicas(control), self.name)
                return Poll(not left, left)

            wait_for(
                observe,
                timeout=self.timeout,
                what=f"ModelReplicas of {self.name!r} to be gone",
                backoff=POLL,
                clock=self.clock,
                sleep=self.sleep,
            )
        return refs

    def _wait_gone(self, control: Any) -> None:
        def observe() -> Poll[dict[str, Any] | None]:
            try:
                obj = control.get(API_VERSION, KIND_INFERENCE_CLUSTER, self.name)
            except ApiError:
                return Poll(False, {"error": "control plane unreachable"})
            if obj is None:
                return Poll(True, None)
            meta = obj.get("metadata") or {}
            return Poll(False, {"finalizers": meta.get("finalizers") or [], "conditions": _conditions(obj)})

        wait_for(
            observe,
            timeout=self.timeout,
            what=f"InferenceCluster {self.name!r} to be deleted",
            backoff=POLL,
            clock=self.clock,
            sleep=self.sleep,
        )

    def _delete_secret(self, control: Any, name: str, live: dict[str, Any] | None) -> None:
        if live is None:
            return
        labels = (live.get("metadata") or {}).get("labels") or {}
        if not plan.is_ours(live) or labels.get(CLUSTER_LABEL) not in (None, self.name):
            self.module.warn(f"Secret {CONTROL_PLANE_NAMESPACE}/{name} is not ours for this cluster; left in place")
            return
        self.actions.append(f"delete Secret {CONTROL_PLANE_NAMESPACE}/{name}")
        if not self.check:
            control.delete(SECRET_API, "Secret", name, CONTROL_PLANE_NAMESPACE)

    def _delete_classes(self, control: Any, names: list[str]) -> None:
        if not names:
            return
        clusters = control.list(API_VERSION, KIND_INFERENCE_CLUSTER)
        for name in names:
            live = control.get(API_VERSION, KIND_INFERENCE_CLASS, name)
            if live is None:
                continue
            users = plan.class_users(clusters, name, besides=self.name)
            entry: dict[str, Any] = {"name": name, "managed": plan.is_ours(live)}
            if not plan.is_ours(live):
                entry.update(action="kept", reason="not created by metalplane.inference")
            elif users:
                entry.update(action="kept", reason=f"used by {', '.join(users)}", used_by=users)
            else:
                entry["action"] = "deleted"
                self.before["classes"][name] = plan.class_view(live)
                self.actions.append(f"delete InferenceClass {name}")
                if not self.check:
                    control.delete(API_VERSION, KIND_INFERENCE_CLASS, name)  # 404: another run was faster
            self.class_results.append(entry)


def _class_or_labels_differ(desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    return plan.class_differs(desired, live) or bool(plan.missing_labels(desired, live))


def _keep_fresh_with_taint(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    return plan.with_taint(live, plan.DRAIN_TAINT) or copy.deepcopy(dict(desired))


def _lacks_taint(_desired: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    return plan.with_taint(live, plan.DRAIN_TAINT) is not None


def _waiting_for_classes(obj: Mapping[str, Any] | None) -> bool:
    cond = plan.conditions_summary(obj).get("ClusterReady") or {}
    return cond.get("reason") == "WaitingForClasses"


def _conditions(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return {
        kind: "/".join(v for v in (c.get("status"), c.get("reason")) if v)
        for kind, c in plan.conditions_summary(obj).items()
    }


def _cluster_result(name: str, obj: Mapping[str, Any] | None) -> dict[str, Any]:
    gateway = (((obj or {}).get("status") or {}).get("gateway") or {}).get("address")
    return {
        "name": name,
        "exists": obj is not None,
        "ready": obj is not None and not readiness.unmet(obj),
        "conditions": _conditions(obj),
        "gateway_address": gateway or None,
        "unmet": readiness.unmet(obj) if obj is not None else [],
        "storage_class_name": ((((obj or {}).get("spec") or {}).get("cluster") or {}).get("existing") or {})
        .get("cache", {})
        .get("storageClassName"),
    }


def _prune(side: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in side.items() if v}
