"""The emulator's deployment and replicaset controllers (kube-controller-manager's, minus the pods).

Why: clients wait on what these controllers write. helm 3 ``--wait`` looks up a Deployment's newest
ReplicaSet (controlled by it, pod template equal but for ``pod-template-hash``) and needs that
ReplicaSet's ``observedGeneration`` and ``readyReplicas``; kubernetes.core ``wait`` and ``kubectl
rollout status`` read the Deployment status the controller sums up from its ReplicaSets. So the
chain follows pkg/controller/deployment of Kubernetes: revision annotations, rolling-update
fenceposts (maxSurge / maxUnavailable), Recreate, pause, scaling events with proportional scaling,
history cleanup, the Available / Progressing conditions (and ProgressDeadlineExceeded).

ReplicaSets get no Pod objects, as DaemonSets get none in this emulator: a ReplicaSet's pods are
counted, created at once and ready ``ready_delay`` (scaled) after its spec changed, unless the
ReplicaSet or its Deployment is held (``lab.metalplane.io/hold-unready``, ``KubeEmulator.hold``).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lab.kube.api import ApiError, Target, now_iso

if TYPE_CHECKING:
    from lab.kube.controllers import Controllers
    from lab.kube.discovery import ResourceType

Obj = dict[str, Any]

MANAGER = "kube-controller-manager"
POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
# Deployment annotations the controller never copies onto its ReplicaSets (deployment/util annotationsToSkip).
SKIPPED_ANNOTATIONS = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        DESIRED_REPLICAS,
        MAX_REPLICAS,
        "deprecated.deployment.rollback.to",
    }
)
# apimachinery rand.SafeEncodeString: the hash's decimal digits mapped onto consonants and digits.
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
FNV32_OFFSET = 0x811C9DC5
FNV32_PRIME = 0x01000193
# spec.progressDeadlineSeconds of MaxInt32 means "no deadline" (deployment/util HasProgressDeadline).
NO_DEADLINE = 2**31 - 1
DEFAULT_FENCEPOST = "25%"  # apps/v1 defaulting of rollingUpdate.maxSurge / maxUnavailable

# --- pure helpers (names follow k8s.io/kubernetes/pkg/controller/deployment/util) ------------------


def fnv32a(data: bytes, value: int = FNV32_OFFSET) -> int:
    for byte in data:
        value = ((value ^ byte) * FNV32_PRIME) & 0xFFFFFFFF
    return value


def template_hash(template: Obj, collision_count: int | None) -> str:
    """``controller.ComputeHash``: FNV-32a of the pod template plus the collision count, as
    SafeEncodeString of its decimal form. The real one hashes Go's dump of the struct, this one the
    canonical JSON: values differ from a real cluster's, the shape (``[4-9bcdf]{1,10}``) is the same."""
    value = fnv32a(json.dumps(template, sort_keys=True, separators=(",", ":")).encode())
    if collision_count is not None:
        value = fnv32a(int(collision_count).to_bytes(4, "little") + bytes(4), value)
    return "".join(SAFE_ALPHABET[byte % len(SAFE_ALPHABET)] for byte in str(value).encode())


def replicas(obj: Obj | None) -> int:
    if obj is None:
        return 0
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def counted(obj: Obj | None, field: str) -> int:
    return int(((obj or {}).get("status") or {}).get(field) or 0)


def total(rss: Iterable[Obj | None], field: str | None = None) -> int:
    """Sum of spec.replicas (``field`` None) or of a status field over ReplicaSets."""
    return sum(replicas(rs) if field is None else counted(rs, field) for rs in rss if rs is not None)


def scaled_value(value: Any, of: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    exact = float(int(text[:-1])) * float(of) / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def rolling(dep: Obj) -> bool:
    return ((dep.get("spec") or {}).get("strategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"


def fenceposts(dep: Obj) -> tuple[int, int]:
    """``ResolveFenceposts``: (maxSurge rounded up, maxUnavailable rounded down), never both 0."""
    update = ((dep.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    desired = replicas(dep)
    surge = scaled_value(update.get("maxSurge", DEFAULT_FENCEPOST), desired, True)
    unavailable = scaled_value(update.get("maxUnavailable", DEFAULT_FENCEPOST), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(dep: Obj) -> int:
    return fenceposts(dep)[0] if rolling(dep) else 0


def max_unavailable(dep: Obj) -> int:
    if not rolling(dep) or replicas(dep) == 0:
        return 0
    return min(fenceposts(dep)[1], replicas(dep))


def has_progress_deadline(dep: Obj) -> bool:
    deadline = (dep.get("spec") or {}).get("progressDeadlineSeconds")
    return deadline is not None and int(deadline) != NO_DEADLINE


def new_condition(kind: str, status: str, reason: str, message: str) -> Obj:
    stamp = now_iso()
    return {
        "type": kind,
        "status": status,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def get_condition(status: Obj | None, kind: str) -> Obj | None:
    return next((c for c in (status or {}).get("conditions") or [] if c.get("type") == kind), None)


def remove_condition(status: Obj, kind: str) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != kind]
    if conditions:
        status["conditions"] = conditions
    else:
        status.pop("conditions", None)


def set_condition(status: Obj, condition: Obj) -> None:
    """``SetDeploymentCondition``: same status and reason = no change; same status keeps the
    transition time; a changed condition moves to the end of the list."""
    current = get_condition(status, condition["type"])
    if current is not None and (current.get("status"), current.get("reason")) == (
        condition["status"],
        condition["reason"],
    ):
        return
    if current is not None and current.get("status") == condition["status"]:
        condition["lastTransitionTime"] = current.get("lastTransitionTime")
    remove_condition(status, condition["type"])
    status["conditions"] = [*status.get("conditions", []), condition]


def _semantic(value: Any) -> Any:
    """apimachinery's semantic equality treats nil and empty maps/slices alike."""
    if isinstance(value, dict):
        return {k: _semantic(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def equal_ignore_hash(one: Obj | None, other: Obj | None) -> bool:
    """``EqualIgnoreHash``: pod templates equal once ``pod-template-hash`` is dropped from both."""

    def strip(template: Obj | None) -> Any:
        out = copy.deepcopy(template or {})
        labels = (out.get("metadata") or {}).get("labels")
        if isinstance(labels, dict):
            labels.pop(POD_TEMPLATE_HASH, None)
        return _semantic(out)

    return bool(strip(one) == strip(other))


def selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """``LabelSelectorAsSelector(...).Matches``; a nil selector matches nothing."""
    if not selector:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, values = expr.get("key"), expr.get("values") or []
        present = key in labels
        if {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(expr.get("operator"), False) is False:
            return False
    return True


def controller_ref(obj: Obj) -> Obj | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def owner_ref(dep: Obj) -> Obj:
    meta = dep["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def revision(rs: Obj) -> int:
    text = (rs["metadata"].get("annotations") or {}).get(REVISION, "")
    return int(text) if text.isdigit() else 0


def by_creation(rs: Obj) -> tuple[str, str]:
    return (rs["metadata"].get("creationTimestamp", ""), rs["metadata"]["name"])


def active(rss: Iterable[Obj | None]) -> list[Obj]:
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


def find_new(dep: Obj, rss: list[Obj]) -> Obj | None:
    """``FindNewReplicaSet``: the oldest ReplicaSet whose template is the Deployment's."""
    template = (dep.get("spec") or {}).get("template")
    return next(
        (rs for rs in sorted(rss, key=by_creation) if equal_ignore_hash(rs["spec"].get("template"), template)), None
    )


def find_active_or_latest(new: Obj | None, old: list[Obj]) -> Obj | None:
    if new is None and not old:
        return None
    newest_first = sorted(old, key=by_creation, reverse=True)
    running = active([*newest_first, new])
    if not running:
        return new if new is not None else newest_first[0]
    return running[0] if len(running) == 1 else None


def is_saturated(dep: Obj, rs: Obj | None) -> bool:
    if rs is None:
        return False
    desired = (rs["metadata"].get("annotations") or {}).get(DESIRED_REPLICAS)
    want = replicas(dep)
    return replicas(rs) == want and desired == str(want) and counted(rs, "availableReplicas") == want


def new_rs_replicas(dep: Obj, all_rss: list[Obj | None], new: Obj) -> int:
    """``NewRSNewReplicas``: how far the new ReplicaSet may be scaled up now."""
    desired = replicas(dep)
    if not rolling(dep):
        return desired
    surge = scaled_value(
        (((dep.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", DEFAULT_FENCEPOST),
        desired,
        True,
    )
    current = total(all_rss)
    if current >= desired + surge:
        return replicas(new)
    return replicas(new) + min(desired + surge - current, desired - replicas(new))


def calculate_status(all_rss: list[Obj | None], new: Obj | None, dep: Obj) -> Obj:
    """``calculateStatus``: counts summed over the ReplicaSets, the Available condition."""
    old_status = dep.get("status") or {}
    available = total(all_rss, "availableReplicas")
    counts = {
        "observedGeneration": dep["metadata"].get("generation", 1),
        "replicas": total(all_rss, "replicas"),
        "updatedReplicas": counted(new, "replicas"),
        "readyReplicas": total(all_rss, "readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": max(total(all_rss) - available, 0),
    }
    status: Obj = {k: v for k, v in counts.items() if v}  # every field is omitempty
    if old_status.get("conditions"):
        status["conditions"] = copy.deepcopy(old_status["conditions"])
    if "collisionCount" in old_status:
        status["collisionCount"] = old_status["collisionCount"]
    if available >= replicas(dep) - max_unavailable(dep):
        set_condition(
            status,
            new_condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
        )
    else:
        set_condition(
            status,
            new_condition(
                "Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
            ),
        )
    return status


def deployment_complete(dep: Obj, status: Obj) -> bool:
    want = replicas(dep)
    return (
        status.get("updatedReplicas", 0) == want
        and status.get("replicas", 0) == want
        and status.get("availableReplicas", 0) == want
        and status.get("observedGeneration", 0) >= dep["metadata"].get("generation", 1)
    )


def deployment_progressing(dep: Obj, status: Obj) -> bool:
    old = dep.get("status") or {}
    old_old = old.get("replicas", 0) - old.get("updatedReplicas", 0)
    new_old = status.get("replicas", 0) - status.get("updatedReplicas", 0)
    return (
        status.get("updatedReplicas", 0) > old.get("updatedReplicas", 0)
        or new_old < old_old
        or status.get("readyReplicas", 0) > old.get("readyReplicas", 0)
        or status.get("availableReplicas", 0) > old.get("availableReplicas", 0)
    )


def _epoch(stamp: str | None) -> float:
    """A condition time as POSIX seconds; a missing or unreadable one counts as now."""
    try:
        parsed = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return time.time()
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def deadline_passes_at(dep: Obj, status: Obj) -> float | None:
    """Wall-clock time the rollout times out (``DeploymentTimedOut``), None when it cannot."""
    condition = get_condition(status, "Progressing")
    if not has_progress_deadline(dep) or condition is None:
        return None
    if condition.get("reason") in ("NewReplicaSetAvailable", "ProgressDeadlineExceeded"):
        return None
    return _epoch(condition.get("lastUpdateTime")) + int(dep["spec"]["progressDeadlineSeconds"])


def set_new_rs_annotations(dep: Obj, rs: Obj, new_revision: int, exists: bool) -> bool:
    """``SetNewReplicaSetAnnotations``: copy the Deployment's annotations, raise the revision
    (keeping the old one in revision-history on a rollback), replica annotations on creation."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in (dep["metadata"].get("annotations") or {}).items():
        if key in SKIPPED_ANNOTATIONS or annotations.get(key) == value:
            continue
        annotations[key] = value
        changed = True
    old = annotations.get(REVISION)
    old_number = int(old) if old and old.isdigit() else 0
    if old_number < new_revision:
        annotations[REVISION] = str(new_revision)
        changed = True
        if old:
            history = annotations.get(REVISION_HISTORY)
            annotations[REVISION_HISTORY] = f"{history},{old}" if history else old
    if not exists:
        changed = set_replica_annotations(dep, rs) or changed
    return changed


def set_replica_annotations(dep: Obj, rs: Obj) -> bool:
    annotations = rs["metadata"].setdefault("annotations", {})
    want = {DESIRED_REPLICAS: str(replicas(dep)), MAX_REPLICAS: str(replicas(dep) + max_surge(dep))}
    if all(annotations.get(k) == v for k, v in want.items()):
        return False
    annotations.update(want)
    return True


# --- the controllers ---------------------------------------------------------------------------


class DeploymentController:
    """Deployment -> ReplicaSets -> counted pods, status back up; runs on the Controllers' scheduler."""

    def __init__(self, controllers: Controllers) -> None:
        self.controllers = controllers
        self.api = controllers.api
        self.pending: set[tuple[str, int]] = set()  # (ReplicaSet uid, generation) whose pods get ready soon
        self.deadlines: set[tuple[str, float]] = set()  # (Deployment uid, time) resyncs already queued

    # --- plumbing ------------------------------------------------------------------------------

    @property
    def dep_type(self) -> ResourceType:
        return self.controllers.rtype("apps", "v1", "deployments")

    @property
    def rs_type(self) -> ResourceType:
        return self.controllers.rtype("apps", "v1", "replicasets")

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.api.store.get(self.api.key(rtype, namespace, name))

    def fresh(self, rtype: ResourceType, obj: Obj) -> Obj | None:
        current = self.get(rtype, obj["metadata"]["namespace"], obj["metadata"]["name"])
        return current if current is not None and current["metadata"]["uid"] == obj["metadata"]["uid"] else None

    def mutate(self, rtype: ResourceType, obj: Obj, change: Callable[[Obj], object], sub: str | None = None) -> Obj:
        """Apply ``change`` to the stored object (same uid) and commit it as the controller manager."""
        meta = obj["metadata"]
        key = self.api.key(rtype, meta["namespace"], meta["name"])
        with self.api.store.lock:
            current = self.api.store.get(key)
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                raise ApiError(404, "NotFound", f'{rtype.plural} "{meta["name"]}" not found')
            new = copy.deepcopy(current)
            change(new)
            if new != current:
                self.api._commit_update(Target(rtype, meta["namespace"], meta["name"], sub), current, new, {}, MANAGER)
            return self.api.store.get(key) or current

    def write_status(self, rtype: ResourceType, obj: Obj, status: Obj) -> Obj:
        def change(new: Obj) -> None:
            new["status"] = status

        return self.mutate(rtype, obj, change, "status")

    def held(self, rs: Obj) -> bool:
        meta = rs["metadata"]
        owner = controller_ref(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            dep = self.get(self.dep_type, meta["namespace"], owner["name"])
            if dep is not None and dep["metadata"]["uid"] == owner.get("uid"):
                return self.controllers.held("deployments", meta["namespace"], owner["name"], dep)
        return self.controllers.held("replicasets", meta["namespace"], meta["name"], rs)

    # --- events --------------------------------------------------------------------------------

    def on_write(self, rtype: ResourceType, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        schedule = self.controllers.scheduler.schedule
        alive = event != "DELETED" and not meta.get("deletionTimestamp")
        if rtype.kind == "Deployment":
            if alive:
                schedule(0, lambda: self.sync_deployment(namespace, name))
            return
        if alive:
            schedule(0, lambda: self.sync_replica_set(namespace, name))
        owner = controller_ref(obj)
        if owner is not None:
            if owner.get("kind") == "Deployment":
                schedule(0, lambda: self.sync_deployment(namespace, owner["name"]))
            return
        labels = meta.get("labels") or {}
        for _key, dep in self.api.store.items("apps", "deployments", namespace):
            if selector_matches((dep.get("spec") or {}).get("selector"), labels):  # an orphan to adopt
                dep_name = dep["metadata"]["name"]
                schedule(0, lambda dep_name=dep_name: self.sync_deployment(namespace, dep_name))

    def reconcile(self, plural: str, namespace: str, name: str) -> None:
        """A hold was set, expired or released: ReplicaSets re-count their ready pods now."""
        if plural == "replicasets":
            self.sync_replica_set(namespace, name, ready_now=True)
            return
        dep = self.get(self.dep_type, namespace, name)
        if dep is None:
            return
        for rs in self.owned(dep):
            self.sync_replica_set(namespace, rs["metadata"]["name"], ready_now=True)
        self.sync_deployment(namespace, name)

    # --- the replicaset controller (pods are counted, not stored) ------------------------------

    def sync_replica_set(self, namespace: str, name: str, ready_now: bool = False) -> None:
        rs = self.get(self.rs_type, namespace, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        meta = rs["metadata"]
        want = replicas(rs)
        generation = meta.get("generation", 1)
        held = self.held(rs)
        ready = 0 if held else want if ready_now else min(counted(rs, "readyReplicas"), want)
        old = rs.get("status") or {}
        status: Obj = {"replicas": want}  # replicas is the one status field without omitempty
        for field, value in (
            ("fullyLabeledReplicas", want),
            ("readyReplicas", ready),
            ("availableReplicas", ready),
            ("observedGeneration", generation),
        ):
            if value:
                status[field] = value
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if status != old:
            self.write_status(self.rs_type, rs, status)
        key = (meta["uid"], generation)
        if not held and ready < want and key not in self.pending:
            self.pending.add(key)
            delay = self.controllers.scaled(self.controllers.ready_delay)
            self.controllers.scheduler.schedule(delay, lambda: self.pods_ready(namespace, name, key))

    def pods_ready(self, namespace: str, name: str, key: tuple[str, int]) -> None:
        self.pending.discard(key)
        rs = self.get(self.rs_type, namespace, name)
        if rs is not None and (rs["metadata"]["uid"], rs["metadata"].get("generation", 1)) == key:
            self.sync_replica_set(namespace, name, ready_now=True)

    # --- the deployment controller -------------------------------------------------------------

    def owned(self, dep: Obj) -> list[Obj]:
        uid = dep["metadata"]["uid"]
        return [
            rs
            for _key, rs in self.api.store.items("apps", "replicasets", dep["metadata"]["namespace"])
            if (controller_ref(rs) or {}).get("uid") == uid
        ]

    def claim(self, dep: Obj) -> list[Obj]:
        """``ClaimReplicaSets``: owned ones that still match, plus orphans that match (adopted)."""
        uid = dep["metadata"]["uid"]
        selector = (dep.get("spec") or {}).get("selector")
        claimed = []
        for _key, rs in self.api.store.items("apps", "replicasets", dep["metadata"]["namespace"]):
            ref = controller_ref(rs)
            matches = selector_matches(selector, rs["metadata"].get("labels") or {})
            if ref is not None and ref.get("uid") == uid:
                if matches:
                    claimed.append(rs)
                else:
                    self.mutate(self.rs_type, rs, lambda new: self._drop_owner(new, uid))
            elif ref is None and matches and not rs["metadata"].get("deletionTimestamp"):
                claimed.append(self.mutate(self.rs_type, rs, lambda new: self._adopt(new, dep)))
        return claimed

    @staticmethod
    def _drop_owner(rs: Obj, uid: str) -> None:
        refs = [r for r in rs["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
        if refs:
            rs["metadata"]["ownerReferences"] = refs
        else:
            rs["metadata"].pop("ownerReferences", None)

    @staticmethod
    def _adopt(rs: Obj, dep: Obj) -> None:
        rs["metadata"]["ownerReferences"] = [*rs["metadata"].get("ownerReferences", []), owner_ref(dep)]

    def split(self, dep: Obj, rss: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        new = find_new(dep, rss)
        return new, [rs for rs in rss if new is None or rs["metadata"]["uid"] != new["metadata"]["uid"]]

    def sync_deployment(self, namespace: str, name: str) -> None:
        dep = self.get(self.dep_type, namespace, name)
        if dep is None or dep["metadata"].get("deletionTimestamp"):
            return
        rss = self.claim(dep)
        for rs in rss:  # a hold set or lifted on the Deployment reaches its pods
            self.sync_replica_set(namespace, rs["metadata"]["name"])
        rss = [current for current in (self.fresh(self.rs_type, rs) for rs in rss) if current is not None]
        dep = self.paused_conditions(dep)
        spec = dep.get("spec") or {}
        new, old = self.split(dep, rss)
        new = self.sync_new_replica_set(dep, new, old, create=False)
        dep = self.fresh(self.dep_type, dep)
        if dep is None:
            return
        if spec.get("paused") or self.scaling_event(dep, [new, *old]):
            self.sync_scale(dep, new, old)
        elif rolling(dep):
            self.rollout_rolling(dep, new, old)
        else:
            self.rollout_recreate(dep, new, old)

    def paused_conditions(self, dep: Obj) -> Obj:
        """``checkPausedConditions``: Progressing Unknown while paused and right after a resume."""
        condition = get_condition(dep.get("status"), "Progressing")
        if not has_progress_deadline(dep) or (condition or {}).get("reason") == "ProgressDeadlineExceeded":
            return dep
        paused_known = (condition or {}).get("reason") == "DeploymentPaused"
        paused = bool((dep.get("spec") or {}).get("paused"))
        if paused == paused_known:
            return dep
        status = copy.deepcopy(dep.get("status") or {})
        if paused:
            set_condition(status, new_condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused"))
        else:
            set_condition(status, new_condition("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed"))
        return self.write_status(self.dep_type, dep, status)

    def scaling_event(self, dep: Obj, rss: list[Obj | None]) -> bool:
        for rs in active(rss):
            desired = (rs["metadata"].get("annotations") or {}).get(DESIRED_REPLICAS)
            if desired is not None and desired != str(replicas(dep)):
                return True
        return False

    def sync_new_replica_set(self, dep: Obj, new: Obj | None, old: list[Obj], create: bool) -> Obj | None:
        """``getNewReplicaSet``: sync the new ReplicaSet's annotations and the Deployment's revision;
        create the ReplicaSet (named after the template hash) when asked to and none exists."""
        next_revision = max((revision(rs) for rs in old), default=0) + 1
        if new is not None:

            def sync(rs: Obj) -> bool:
                changed = set_new_rs_annotations(dep, rs, next_revision, exists=True)
                min_ready = (dep.get("spec") or {}).get("minReadySeconds") or 0
                if (rs["spec"].get("minReadySeconds") or 0) != min_ready:
                    rs["spec"]["minReadySeconds"] = min_ready
                    changed = True
                return changed

            if sync(copy.deepcopy(new)):
                new = self.mutate(self.rs_type, new, sync)
            self.set_deployment_revision(dep, str(revision(new)))
            current = self.fresh(self.dep_type, dep)
            if (
                current is not None
                and has_progress_deadline(current)
                and get_condition(current.get("status"), "Progressing") is None
            ):
                status = copy.deepcopy(current.get("status") or {})
                message = f'Found new replica set "{new["metadata"]["name"]}"'
                set_condition(status, new_condition("Progressing", "True", "FoundNewReplicaSet", message))
                self.write_status(self.dep_type, current, status)
            return new
        if not create:
            return None
        return self.create_replica_set(dep, old, next_revision)

    def create_replica_set(self, dep: Obj, old: list[Obj], next_revision: int) -> Obj | None:
        meta, spec = dep["metadata"], dep["spec"]
        namespace = meta["namespace"]
        collisions = (dep.get("status") or {}).get("collisionCount")
        pod_hash = template_hash(spec["template"], collisions)
        template = copy.deepcopy(spec["template"])
        template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = pod_hash
        selector = copy.deepcopy(spec["selector"])
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = pod_hash
        body: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": namespace,
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [owner_ref(dep)],
            },
            "spec": {"replicas": 0, "selector": selector, "template": template},
        }
        if spec.get("minReadySeconds"):
            body["spec"]["minReadySeconds"] = spec["minReadySeconds"]
        set_new_rs_annotations(dep, body, next_revision, exists=False)
        body["spec"]["replicas"] = new_rs_replicas(dep, [*old, body], body)
        name = body["metadata"]["name"]
        created: Obj | None = None
        try:
            self.api.create(Target(self.rs_type, namespace, None, None), body, {}, MANAGER)
        except ApiError as exc:
            if exc.code != 409:
                raise
            existing = self.get(self.rs_type, namespace, name)
            mine = existing is not None and (controller_ref(existing) or {}).get("uid") == meta["uid"]
            if not mine or not equal_ignore_hash(existing["spec"].get("template"), spec["template"]):
                status = copy.deepcopy(dep.get("status") or {})
                status["collisionCount"] = (collisions or 0) + 1  # a new hash next time: the write resyncs
                self.write_status(self.dep_type, dep, status)
                return None
            created = existing
        self.set_deployment_revision(dep, str(next_revision))
        current = self.fresh(self.dep_type, dep)
        if created is None and current is not None and has_progress_deadline(current):
            status = copy.deepcopy(current.get("status") or {})
            message = f'Created new replica set "{name}"'
            set_condition(status, new_condition("Progressing", "True", "NewReplicaSetCreated", message))
            self.write_status(self.dep_type, current, status)
        self.sync_replica_set(namespace, name)
        return self.get(self.rs_type, namespace, name)

    def set_deployment_revision(self, dep: Obj, value: str) -> None:
        if (dep["metadata"].get("annotations") or {}).get(REVISION) == value:
            return

        def change(new: Obj) -> None:
            new["metadata"].setdefault("annotations", {})[REVISION] = value

        self.mutate(self.dep_type, dep, change)

    def scale(self, rs: Obj, size: int, dep: Obj) -> Obj:
        """``scaleReplicaSet``: size and the replica annotations; its pods follow at once."""
        probe = copy.deepcopy(rs)
        if replicas(rs) == size and not set_replica_annotations(dep, probe):
            return rs

        def change(new: Obj) -> None:
            new["spec"]["replicas"] = size
            set_replica_annotations(dep, new)

        scaled = self.mutate(self.rs_type, rs, change)
        self.sync_replica_set(scaled["metadata"]["namespace"], scaled["metadata"]["name"])
        return self.fresh(self.rs_type, scaled) or scaled

    def sync_scale(self, dep: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``sync``: a scaling event or a paused Deployment: scale, clean up when paused, status."""
        self.scale_deployment(dep, new, old)
        if (dep.get("spec") or {}).get("paused"):
            self.cleanup(dep, [o for o in (self.fresh(self.rs_type, rs) for rs in old) if o is not None])
        self.sync_status(dep, rollout=False)

    def scale_deployment(self, dep: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``scale``: one active ReplicaSet takes the whole count, a saturated new one ends the old
        ones, otherwise the difference is spread proportionally (rolling updates only)."""
        target = find_active_or_latest(new, old)
        if target is not None:
            if replicas(target) != replicas(dep):
                self.scale(target, replicas(dep), dep)
            return
        if is_saturated(dep, new):
            for rs in active(old):
                self.scale(rs, 0, dep)
            return
        if not rolling(dep):
            return
        running = active([*old, new])
        allowed = replicas(dep) + max_surge(dep) if replicas(dep) > 0 else 0
        to_add = allowed - total(running)
        # Largest first; on a tie the newer first when scaling up (BySizeNewer), the older when down.
        running.sort(key=by_creation, reverse=to_add > 0)
        running.sort(key=lambda rs: -replicas(rs))
        sizes, added = {}, 0
        for rs in running:
            share = self.proportion(rs, dep, to_add, added)
            sizes[rs["metadata"]["uid"]] = replicas(rs) + share
            added += share
        for index, rs in enumerate(running):
            uid = rs["metadata"]["uid"]
            if index == 0 and to_add:
                sizes[uid] = max(sizes[uid] + to_add - added, 0)
            self.scale(rs, sizes[uid], dep)

    @staticmethod
    def proportion(rs: Obj, dep: Obj, to_add: int, added: int) -> int:
        """``GetProportion``."""
        if replicas(rs) == 0 or to_add in (0, added):
            return 0
        if replicas(dep) == 0:
            fraction = -replicas(rs)
        else:
            annotated = (rs["metadata"].get("annotations") or {}).get(MAX_REPLICAS, "")
            base = int(annotated) if annotated.isdigit() else counted(dep, "replicas")
            size = replicas(rs) * (replicas(dep) + max_surge(dep)) / base if base else replicas(rs)
            fraction = math.floor(size + 0.5) - replicas(rs)
        allowed = to_add - added
        return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)

    def rollout_rolling(self, dep: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``rolloutRolling``: scale the new ReplicaSet up within maxSurge, the old ones down
        within maxUnavailable; one step per sync (the ReplicaSets' status changes drive the next)."""
        if new is None:
            new = self.sync_new_replica_set(dep, None, old, create=True)
            if new is None:
                return
        all_rss = [*old, new]
        if replicas(new) != replicas(dep):
            size = replicas(dep) if replicas(new) > replicas(dep) else new_rs_replicas(dep, all_rss, new)
            if size != replicas(new):
                self.scale(new, size, dep)
                self.sync_status(dep)
                return
        if self.reconcile_old(dep, all_rss, active(old), new):
            self.sync_status(dep)
            return
        if deployment_complete(dep, dep.get("status") or {}):
            self.cleanup(dep, old)
        self.sync_status(dep)

    def reconcile_old(self, dep: Obj, all_rss: list[Obj], old: list[Obj], new: Obj) -> bool:
        """``reconcileOldReplicaSets``: unhealthy old replicas first, then as many as stay available."""
        if total(old) == 0:
            return False
        min_available = replicas(dep) - max_unavailable(dep)
        new_unavailable = replicas(new) - counted(new, "availableReplicas")
        max_down = total(all_rss) - min_available - new_unavailable
        if max_down <= 0:
            return False
        old = sorted(old, key=by_creation)
        cleaned = 0
        for index, rs in enumerate(old):
            unhealthy = replicas(rs) - counted(rs, "availableReplicas")
            if cleaned >= max_down or replicas(rs) == 0 or unhealthy == 0:
                continue
            down = min(max_down - cleaned, unhealthy)
            old[index] = self.scale(rs, replicas(rs) - down, dep)
            cleaned += down
        available = total([*old, new], "availableReplicas")
        scaled_down = 0
        if available > min_available:
            budget = available - min_available
            for rs in old:
                if scaled_down >= budget:
                    break
                if replicas(rs) == 0:
                    continue
                down = min(replicas(rs), budget - scaled_down)
                self.scale(rs, replicas(rs) - down, dep)
                scaled_down += down
        return cleaned + scaled_down > 0

    def rollout_recreate(self, dep: Obj, new: Obj | None, old: list[Obj]) -> None:
        """``rolloutRecreate``: every old pod gone before the new ReplicaSet scales up."""
        running = active(old)
        for rs in running:
            self.scale(rs, 0, dep)
        if running:
            self.sync_status(dep)
            return
        if total(old, "replicas") > 0:  # old pods still terminating
            self.sync_status(dep)
            return
        if new is None:
            new = self.sync_new_replica_set(dep, None, old, create=True)
            if new is None:
                return
        if replicas(new) != replicas(dep):
            self.scale(new, replicas(dep), dep)
        current = self.fresh(self.dep_type, dep)
        if current is not None and deployment_complete(current, current.get("status") or {}):
            self.cleanup(current, old)
        self.sync_status(dep)

    def cleanup(self, dep: Obj, old: list[Obj]) -> None:
        """``cleanupDeployment``: delete the oldest scaled-down ReplicaSets beyond revisionHistoryLimit."""
        limit = (dep.get("spec") or {}).get("revisionHistoryLimit")
        if limit is None:
            return
        alive = sorted(
            (rs for rs in old if not rs["metadata"].get("deletionTimestamp")),
            key=lambda rs: (revision(rs), *by_creation(rs)),
        )
        for rs in alive[: max(len(alive) - int(limit), 0)]:
            observed = counted(rs, "observedGeneration")
            if counted(rs, "replicas") or replicas(rs) or rs["metadata"].get("generation", 1) > observed:
                continue
            self.controllers.delete_obj(self.rs_type, rs)

    def sync_status(self, dep: Obj, rollout: bool = True) -> None:
        """``syncRolloutStatus`` (``rollout``) or ``syncDeploymentStatus``: recount from the
        ReplicaSets as they are now; Progressing follows the rollout, with its deadline."""
        current = self.fresh(self.dep_type, dep)
        if current is None:
            return
        new, old = self.split(current, self.owned(current))
        status = calculate_status([*old, new], new, current)
        if rollout:
            self.progress(current, new, status)
        if status != (current.get("status") or {}):
            self.write_status(self.dep_type, current, status)
        elif rollout:
            self.requeue_stuck(current, status)

    def progress(self, dep: Obj, new: Obj | None, status: Obj) -> None:
        if not has_progress_deadline(dep):
            remove_condition(status, "Progressing")
            return
        current = get_condition(dep.get("status"), "Progressing")
        done = (
            status.get("replicas", 0) == status.get("updatedReplicas", 0)
            and (current or {}).get("reason") == "NewReplicaSetAvailable"
        )
        if done:
            return
        subject = (
            f'ReplicaSet "{new["metadata"]["name"]}"' if new is not None else f'Deployment "{dep["metadata"]["name"]}"'
        )
        if deployment_complete(dep, status):
            message = f"{subject} has successfully progressed."
            set_condition(status, new_condition("Progressing", "True", "NewReplicaSetAvailable", message))
        elif deployment_progressing(dep, status):
            condition = new_condition("Progressing", "True", "ReplicaSetUpdated", f"{subject} is progressing.")
            if current is not None:
                if current.get("status") == "True":
                    condition["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(status, "Progressing")
            set_condition(status, condition)
        else:
            passes = deadline_passes_at(dep, status)
            if passes is not None and passes < time.time():
                message = f"{subject} has timed out progressing."
                set_condition(status, new_condition("Progressing", "False", "ProgressDeadlineExceeded", message))

    def requeue_stuck(self, dep: Obj, status: Obj) -> None:
        """``requeueStuckDeployment``: no progress now, so look again when the deadline passes."""
        passes = deadline_passes_at(dep, status)
        if passes is None or deployment_complete(dep, status):
            return
        key = (dep["metadata"]["uid"], passes)
        if key in self.deadlines:
            return
        self.deadlines.add(key)
        namespace, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
        self.controllers.scheduler.schedule(
            max(passes - time.time(), 0.0) + 1.0, lambda: self.sync_deployment(namespace, name)
        )
