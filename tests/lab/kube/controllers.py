"""The emulator's stand-ins for kube-controller-manager and apiextensions controllers.

Why: modules wait on effects that controllers produce, not on the write itself: a CRD becomes
Established (and reaches discovery ~0.5 s later), a namespace deletion empties the namespace first,
garbage collection follows ownerReferences, workloads become ready some time after a spec change.
They run on one scheduler thread, after the write that triggered them, like real controllers.
Deployments and ReplicaSets have their own module (``kube_apps``): helm waits on the chain.
"""

from __future__ import annotations

import base64
import copy
import heapq
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from lab.kube import schemas
from lab.kube.api import CRD_CLEANUP_FINALIZER, DEFAULT_NAMESPACES, HOLD_ANNOTATION, ApiError, ApiServer, Target
from lab.kube.apps import DeploymentController
from lab.kube.discovery import ResourceType

Obj = dict[str, Any]
LOG = logging.getLogger("lab.kube")

# A real apiserver lists a new CRD in discovery about this long after Established (scaled by delay_scale).
CRD_DISCOVERY_LAG = 0.5
# Seconds (scaled) before a changed DaemonSet/StatefulSet, or a ReplicaSet's new pods, report ready;
# 1 s surfaces the kubernetes.core wait_sleep trap (a wait that checks once passes on an instant server only).
WORKLOAD_READY_DELAY = 1.0
CONTROLLER = "lab-controller"
# Workloads whose status this module simulates directly (Deployment/ReplicaSet: kube_apps).
WORKLOADS = ("DaemonSet", "StatefulSet")
ROLLOUT_KINDS = ("Deployment", "ReplicaSet")
# The legacy ServiceAccount token Secret the token controller fills in (kubernetes/kubernetes
# pkg/controller/serviceaccount/tokens_controller.go; "Manually create a long-lived API token for a
# ServiceAccount", kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/).
SA_TOKEN_TYPE = "kubernetes.io/service-account-token"
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"
TOKEN_CONTROLLER = "kube-controller-manager"


class Scheduler:
    """Runs callables after a delay on one background thread (the controllers' work queue)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="kube-lab-controllers", daemon=True)
        self._thread.start()

    def schedule(self, delay: float, action: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + max(delay, 0.0), next(self._seq), action))
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout=wait)
                if self._stopped:
                    return
                _due, _seq, action = heapq.heappop(self._heap)
            try:
                action()
            except ApiError as exc:  # an object changed under the controller: the next event retries
                LOG.debug("controller action: %s", exc.message)
            except Exception:
                LOG.exception("controller action failed")


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for tol in tolerations or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and (not tol.get("key") or tol["key"] == taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class Controllers:
    """Reacts to writes (``ApiServer.on_write``) by scheduling reconciliations."""

    def __init__(
        self,
        api: ApiServer,
        scheduler: Scheduler,
        delay_scale: float,
        workloads: bool = True,
        ready_delay: float = WORKLOAD_READY_DELAY,
    ) -> None:
        self.api = api
        self.scheduler = scheduler
        self.delay_scale = delay_scale
        self.workloads = workloads
        self.ready_delay = ready_delay
        # (namespace, name) of workloads held unready by a simulator, until a monotonic time (inf = until released).
        self.holds: dict[tuple[str, str, str], float] = {}
        self.apps = DeploymentController(self)
        api.on_write.append(self.on_write)

    def scaled(self, seconds: float) -> float:
        return seconds * self.delay_scale

    # --- helpers --------------------------------------------------------------------------------

    def rtype(self, group: str, version: str, plural: str) -> ResourceType:
        return self.api.types[(group, version, plural)]

    def write_status(self, rtype: ResourceType, obj: Obj, status: Obj) -> None:
        meta = obj["metadata"]
        with self.api.store.lock:
            current = self.api.store.get(self.api.key(rtype, meta.get("namespace"), meta["name"]))
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                return
            new = copy.deepcopy(current)
            new["status"] = status
            target = Target(rtype, meta.get("namespace"), meta["name"], "status")
            self.api._commit_update(target, current, new, {}, CONTROLLER)

    def delete_obj(self, rtype: ResourceType, obj: Obj, policy: str = "Background") -> None:
        meta = obj["metadata"]
        try:
            self.api.delete(Target(rtype, meta.get("namespace"), meta["name"], None), {"propagationPolicy": policy})
        except ApiError as exc:
            if exc.code != 404:
                raise

    # --- event routing --------------------------------------------------------------------------

    def on_write(self, rtype: ResourceType, event: str, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        kind = rtype.kind
        if kind == "Namespace":
            if event == "ADDED":
                self.scheduler.schedule(0, lambda: self.root_ca(meta["name"]))
            elif meta.get("deletionTimestamp"):
                self.scheduler.schedule(0, lambda: self.finalize_namespace(meta["name"]))
        if rtype.namespaced and event in ("DELETED", "MODIFIED"):
            ns = meta.get("namespace")
            self.scheduler.schedule(0, lambda: self.finalize_namespace(ns, only_if_terminating=True))
        if event == "DELETED":
            self.scheduler.schedule(0, lambda: self.collect_dependents(obj))
        elif meta.get("deletionTimestamp") and "foregroundDeletion" in (meta.get("finalizers") or []):
            self.scheduler.schedule(0, lambda: self.foreground(rtype, obj))
        if kind == "CustomResourceDefinition" and event != "DELETED":
            self.scheduler.schedule(0, lambda: self.crd(meta["name"]))
        if kind == "Node":
            self.scheduler.schedule(0, self.reconcile_daemonsets)
        if kind == "Secret" and event != "DELETED" and obj.get("type") == SA_TOKEN_TYPE:
            self.scheduler.schedule(0, lambda: self.service_account_token(meta["namespace"], meta["name"]))
        if kind == "ServiceAccount" and event == "DELETED":
            self.scheduler.schedule(0, lambda: self.revoke_service_account_tokens(meta["namespace"], meta["uid"]))
        if self.workloads and kind in ROLLOUT_KINDS and rtype.group == "apps":
            self.apps.on_write(rtype, event, obj)
        if self.workloads and kind in WORKLOADS and event != "DELETED" and not meta.get("deletionTimestamp"):
            observed = (obj.get("status") or {}).get("observedGeneration")
            if observed != meta.get("generation"):
                key = (rtype.plural, meta["namespace"], meta["name"])
                self.scheduler.schedule(self.scaled(self.ready_delay), lambda: self.reconcile_workload(*key))
        if self.workloads and kind == "Job" and event == "ADDED":
            self.scheduler.schedule(self.scaled(self.ready_delay), lambda: self.complete_job(obj))

    # --- namespaces -----------------------------------------------------------------------------

    def root_ca(self, namespace: str) -> None:
        cm_type = self.rtype("", "v1", "configmaps")
        ns = self.api.store.get(self.api.key(self.rtype("", "v1", "namespaces"), None, namespace))
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        if self.api.store.get(self.api.key(cm_type, namespace, "kube-root-ca.crt")) is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "kube-root-ca.crt",
                    "namespace": namespace,
                    "annotations": {
                        "kubernetes.io/description": "Contains a CA bundle "
                        "that can be used to verify the kube-apiserver when using internal endpoints."
                    },
                },
                "data": {"ca.crt": self.api.ca_bundle},
            }
            self._create_quietly(cm_type, namespace, body)
        sa_type = self.rtype("", "v1", "serviceaccounts")
        if self.api.store.get(self.api.key(sa_type, namespace, "default")) is None:
            self._create_quietly(sa_type, namespace, {"metadata": {"name": "default"}})

    def _create_quietly(self, rtype: ResourceType, namespace: str, body: Obj) -> None:
        try:
            self.api.create(Target(rtype, namespace, None, None), body, {}, "kube-controller-manager")
        except ApiError as exc:
            if exc.code not in (409, 403, 404):
                raise

    def finalize_namespace(self, namespace: str | None, only_if_terminating: bool = False) -> None:
        if not namespace:
            return
        ns_type = self.rtype("", "v1", "namespaces")
        with self.api.store.lock:
            ns = self.api.store.get(self.api.key(ns_type, None, namespace))
            if ns is None or not ns["metadata"].get("deletionTimestamp"):
                return
            remaining = [(k, o) for k, o in self.api.store.objects.items() if k[2] == namespace]
        by_plural = {(t.group, t.plural): t for t in self.api.types.values() if t.namespaced}
        for key, obj in remaining:
            rtype = by_plural.get((key[0], key[1]))
            if rtype is not None and not obj["metadata"].get("deletionTimestamp"):
                self.delete_obj(rtype, obj)
        with self.api.store.lock:
            left = [k for k in self.api.store.objects if k[2] == namespace]
            ns = self.api.store.get(self.api.key(ns_type, None, namespace))
            if left or ns is None:
                return
            self.api.store.remove(self.api.key(ns_type, None, namespace))
        del only_if_terminating

    # --- service account tokens -----------------------------------------------------------------

    def service_account_token(self, namespace: str, name: str) -> None:
        """The token controller: fill ``data.token``, ``data["ca.crt"]`` and ``data.namespace`` of a
        ``kubernetes.io/service-account-token`` Secret and stamp the ServiceAccount's uid on it; a Secret naming
        a ServiceAccount that does not exist (or another one of that name) is deleted, as the real controller does.
        The token is an opaque random string here (the real one is a JWT signed with the service account key):
        ``KubeEmulator.authenticates`` accepts it while the Secret and its ServiceAccount exist."""
        secret_type = self.rtype("", "v1", "secrets")
        sa_type = self.rtype("", "v1", "serviceaccounts")
        with self.api.store.lock:
            secret = self.api.store.get(self.api.key(secret_type, namespace, name))
            if secret is None or secret["metadata"].get("deletionTimestamp") or secret.get("type") != SA_TOKEN_TYPE:
                return
            annotations = secret["metadata"].get("annotations") or {}
            account = self.api.store.get(self.api.key(sa_type, namespace, annotations.get(SA_NAME_ANNOTATION, "")))
            uid = annotations.get(SA_UID_ANNOTATION)
            if account is None or (uid and uid != account["metadata"]["uid"]):
                self.delete_obj(secret_type, secret)
                return
            data = secret.get("data") or {}
            if data.get("token") and uid:
                return
            new = copy.deepcopy(secret)
            new["metadata"].setdefault("annotations", {})[SA_UID_ANNOTATION] = account["metadata"]["uid"]
            new["data"] = {
                **data,
                "token": data.get("token") or base64.b64encode(secrets.token_urlsafe(32).encode()).decode(),
                "ca.crt": base64.b64encode(self.api.ca_bundle.encode()).decode(),
                "namespace": base64.b64encode(namespace.encode()).decode(),
            }
            self.api._commit_update(Target(secret_type, namespace, name, None), secret, new, {}, TOKEN_CONTROLLER)

    def revoke_service_account_tokens(self, namespace: str, account_uid: str) -> None:
        """A deleted ServiceAccount's token Secrets are deleted with it (the token controller)."""
        secret_type = self.rtype("", "v1", "secrets")
        for _key, secret in self.api.store.items("", "secrets", namespace):
            if (secret["metadata"].get("annotations") or {}).get(SA_UID_ANNOTATION) == account_uid:
                self.delete_obj(secret_type, secret)

    def service_account_for(self, token: str) -> Obj | None:
        """The ServiceAccount whose token Secret carries ``token`` (None: no such live token)."""
        sa_type = self.rtype("", "v1", "serviceaccounts")
        encoded = base64.b64encode(token.encode()).decode()
        for _key, secret in self.api.store.items("", "secrets", None):
            if secret.get("type") != SA_TOKEN_TYPE or (secret.get("data") or {}).get("token") != encoded:
                continue
            annotations = secret["metadata"].get("annotations") or {}
            account = self.api.store.get(
                self.api.key(sa_type, secret["metadata"]["namespace"], annotations.get(SA_NAME_ANNOTATION, ""))
            )
            if account is not None and account["metadata"]["uid"] == annotations.get(SA_UID_ANNOTATION):
                return account
        return None

    # --- garbage collection ---------------------------------------------------------------------

    def collect_dependents(self, owner: Obj) -> None:
        for rtype, obj in self.api.dependents(owner):
            self.delete_obj(rtype, obj)

    def foreground(self, rtype: ResourceType, owner: Obj) -> None:
        dependents = self.api.dependents(owner)
        for dep_type, obj in dependents:
            if not obj["metadata"].get("deletionTimestamp"):
                self.delete_obj(dep_type, obj, "Foreground")
        if dependents:
            self.scheduler.schedule(0.05, lambda: self.foreground(rtype, owner))
            return
        meta = owner["metadata"]
        with self.api.store.lock:
            current = self.api.store.get(self.api.key(rtype, meta.get("namespace"), meta["name"]))
            if current is None:
                return
            new = copy.deepcopy(current)
            new["metadata"]["finalizers"] = [
                f for f in current["metadata"].get("finalizers", []) if f != "foregroundDeletion"
            ]
            self.api._commit_update(
                Target(rtype, meta.get("namespace"), meta["name"], None), current, new, {}, "garbage-collector"
            )

    # --- CRDs -----------------------------------------------------------------------------------

    def crd(self, name: str) -> None:
        crd_type = self.rtype("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        with self.api.store.lock:
            crd = self.api.store.get(self.api.key(crd_type, None, name))
            if crd is None:
                return
            if crd["metadata"].get("deletionTimestamp"):
                self.cleanup_crd(crd_type, crd)
                return
            self.register_crd(crd)
            status = copy.deepcopy(crd.get("status") or {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") not in ("NamesAccepted", "Established")
            ]
            stamp = crd["metadata"]["creationTimestamp"]
            for kind, reason, message in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ):
                conditions.append(
                    {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": stamp}
                )
            status["conditions"] = conditions
            status["acceptedNames"] = crd["spec"]["names"]
            if status != crd.get("status"):
                self.write_status(crd_type, crd, status)

    def register_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        names = spec["names"]
        existing = {(t.group, t.version): t for t in self.api.types.values() if t.crd == crd["metadata"]["name"]}
        self.api.unregister_crd(crd["metadata"]["name"])
        for version in spec.get("versions") or []:
            if not version.get("served", True):
                continue
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            }
            subresources = version.get("subresources") or {}
            previous = existing.get((spec["group"], version["name"]))
            visible_at = previous.visible_at if previous else time.monotonic() + self.scaled(CRD_DISCOVERY_LAG)
            self.api.register(
                ResourceType(
                    group=spec["group"],
                    version=version["name"],
                    plural=names["plural"],
                    kind=names["kind"],
                    namespaced=spec.get("scope") == "Namespaced",
                    status="status" in subresources,
                    scale="scale" in subresources,
                    short_names=tuple(names.get("shortNames") or ()),
                    crd=crd["metadata"]["name"],
                    schema=schema,
                    validator=schemas.crd_validator(schema),
                    selectable_fields=tuple(f["jsonPath"].lstrip(".") for f in version.get("selectableFields") or []),
                    visible_at=visible_at,
                    categories=tuple(names.get("categories") or ()),
                )
            )

    def cleanup_crd(self, crd_type: ResourceType, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        spec = crd["spec"]
        left = False
        for key, obj in list(self.api.store.objects.items()):
            if key[0] == spec["group"] and key[1] == spec["names"]["plural"]:
                left = True
                rtype = next((t for t in self.api.types.values() if t.crd == name), None)
                if rtype is not None and not obj["metadata"].get("deletionTimestamp"):
                    self.delete_obj(rtype, obj)
        if left:
            self.scheduler.schedule(0.05, lambda: self.crd(name))
            return
        self.api.unregister_crd(name)
        new = copy.deepcopy(crd)
        new["metadata"]["finalizers"] = [f for f in crd["metadata"].get("finalizers", []) if f != CRD_CLEANUP_FINALIZER]
        self.api._commit_update(Target(crd_type, None, name, None), crd, new, {}, CONTROLLER)

    # --- workloads ------------------------------------------------------------------------------

    def held(self, plural: str, namespace: str, name: str, obj: Obj) -> bool:
        if (obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION) == "true":
            return True
        return self.holds.get((plural, namespace, name), 0.0) > time.monotonic()

    def eligible_nodes(self, daemonset: Obj) -> list[Obj]:
        pod_spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
        selector = pod_spec.get("nodeSelector") or {}
        tolerations = pod_spec.get("tolerations") or []
        nodes = [o for _k, o in self.api.store.items("", "nodes", None)]
        out = []
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            if any(labels.get(k) != v for k, v in selector.items()):
                continue
            if all(tolerates(tolerations, t) for t in (node.get("spec") or {}).get("taints") or []):
                out.append(node)
        return out

    def reconcile_daemonsets(self) -> None:
        if not self.workloads:
            return
        for _key, obj in self.api.store.items("apps", "daemonsets", None):
            if (obj.get("status") or {}).get("observedGeneration") == obj["metadata"].get("generation"):
                self.reconcile_workload("daemonsets", obj["metadata"]["namespace"], obj["metadata"]["name"])

    def reconcile_workload(self, plural: str, namespace: str, name: str) -> None:
        if plural in ("deployments", "replicasets"):
            self.apps.reconcile(plural, namespace, name)
            return
        rtype = self.rtype("apps", "v1", plural)
        obj = self.api.store.get(self.api.key(rtype, namespace, name))
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        held = self.held(plural, namespace, name, obj)
        generation = obj["metadata"].get("generation", 1)
        status = copy.deepcopy(obj.get("status") or {})
        if plural == "daemonsets":
            nodes = self.eligible_nodes(obj)
            desired = len(nodes)
            ready = 0 if held else sum(1 for n in nodes if node_ready(n))
            status.update(
                {
                    "currentNumberScheduled": desired,
                    "desiredNumberScheduled": desired,
                    "numberMisscheduled": 0,
                    "numberReady": ready,
                    "updatedNumberScheduled": desired,
                    "numberAvailable": ready,
                    "observedGeneration": generation,
                }
            )
            if desired - ready:
                status["numberUnavailable"] = desired - ready
            else:
                status.pop("numberUnavailable", None)
        else:
            replicas = int((obj.get("spec") or {}).get("replicas", 1))
            ready = 0 if held else replicas
            status.update(
                {
                    "observedGeneration": generation,
                    "replicas": replicas,
                    "updatedReplicas": replicas,
                    "readyReplicas": ready,
                    "availableReplicas": ready,
                }
            )
            for zero_field in ("readyReplicas", "availableReplicas"):
                if not status[zero_field]:
                    del status[zero_field]
            if plural == "statefulsets":
                status.update(
                    {
                        "currentReplicas": replicas,
                        "currentRevision": f"{name}-1",
                        "updateRevision": f"{name}-1",
                        "collisionCount": 0,
                    }
                )
        self.write_status(rtype, obj, status)

    def release(self, plural: str, namespace: str, name: str) -> None:
        self.holds.pop((plural, namespace, name), None)
        self.reconcile_workload(plural, namespace, name)

    def complete_job(self, job: Obj) -> None:
        rtype = self.rtype("batch", "v1", "jobs")
        meta = job["metadata"]
        current = self.api.store.get(self.api.key(rtype, meta["namespace"], meta["name"]))
        if current is None:
            return
        stamp = current["metadata"]["creationTimestamp"]
        status = {
            "succeeded": 1,
            "startTime": stamp,
            "completionTime": stamp,
            "ready": 0,
            "terminating": 0,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": stamp, "lastTransitionTime": stamp},
                {"type": "Complete", "status": "True", "lastProbeTime": stamp, "lastTransitionTime": stamp},
            ],
        }
        self.write_status(rtype, current, status)


def seed_namespaces(api: ApiServer) -> None:
    ns_type = api.types[("", "v1", "namespaces")]
    for name in DEFAULT_NAMESPACES:
        api.create(Target(ns_type, None, None, None), {"metadata": {"name": name}}, {}, "kube-apiserver")
