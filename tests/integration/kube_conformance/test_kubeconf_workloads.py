"""Deployment -> ReplicaSet -> ready status: what helm 3 ``--wait`` and kubernetes.core ``wait`` read.

Why: helm 3.18 (pkg/kube/ready.go) finds a Deployment's new ReplicaSet (controlled by it, template
equal but for ``pod-template-hash``) and waits for that ReplicaSet's observedGeneration and
readyReplicas; kubernetes.core and ``kubectl rollout status`` read the Deployment status. On the real
lane the real deployment/replicaset controllers, scheduler and the fake kubelet produce the chain;
on the emulator, ``lab.kube.apps``. Same assertions on both.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from kubeconf_support import KubeTarget, eventually, wait_deleted
from kubernetes import client

from lab.kube.api import HOLD_ANNOTATION

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
# apimachinery rand.SafeEncodeString of a uint32's decimal digits.
HASH_SHAPE = re.compile(r"^[4-9bcdf]{1,10}$")
TIMEOUT = 60.0


def deployment(name: str, image: str = "busybox:1.36", replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": image}],
                },
            },
            **spec,
        },
    }


class Apps:
    """Plain-JSON reads (the typed models would hide which fields the server omitted)."""

    def __init__(self, target: KubeTarget, ns: str) -> None:
        self.target, self.ns = target, ns
        self.api = client.AppsV1Api(target.api_client())

    def get(self, name: str) -> dict[str, Any]:
        code, body = self.target.raw("GET", f"/apis/apps/v1/namespaces/{self.ns}/deployments/{name}")
        assert code == 200, body
        return body

    def replica_sets(self, owner: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        code, body = self.target.raw("GET", f"/apis/apps/v1/namespaces/{self.ns}/replicasets")
        assert code == 200, body
        items = body["items"]
        if owner is not None:
            uid = owner["metadata"]["uid"]
            items = [rs for rs in items if any(r.get("uid") == uid for r in rs["metadata"].get("ownerReferences", []))]
        return sorted(items, key=lambda rs: int(rs["metadata"].get("annotations", {}).get(REVISION, "0")))

    def patch(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        code, out = self.target.raw(
            "PATCH",
            f"/apis/apps/v1/namespaces/{self.ns}/deployments/{name}",
            body,
            {"Content-Type": "application/merge-patch+json"},
        )
        assert code == 200, out
        return out


def without_hash(template: dict[str, Any]) -> dict[str, Any]:
    labels = {k: v for k, v in template["metadata"].get("labels", {}).items() if k != HASH_LABEL}
    return {**template, "metadata": {**template["metadata"], "labels": labels}}


def helm_new_replica_set(dep: dict[str, Any], rss: list[dict[str, Any]]) -> dict[str, Any] | None:
    """deploymentutil.GetNewReplicaSet as helm 3.18 calls it: controlled by the Deployment, labels
    matching its selector, the oldest whose template equals the Deployment's but for the hash."""
    uid = dep["metadata"]["uid"]
    selector = dep["spec"]["selector"]["matchLabels"]
    owned = [
        rs
        for rs in rss
        if any(r.get("controller") and r.get("uid") == uid for r in rs["metadata"].get("ownerReferences", []))
        and all(rs["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
    ]
    owned.sort(key=lambda rs: (rs["metadata"]["creationTimestamp"], rs["metadata"]["name"]))
    return next((rs for rs in owned if without_hash(rs["spec"]["template"]) == dep["spec"]["template"]), None)


def helm_ready(dep: dict[str, Any], rss: list[dict[str, Any]]) -> bool:
    """helm 3.18 ReadyChecker for a Deployment with the default rolling update (25%/25%)."""
    new = helm_new_replica_set(dep, rss)
    if new is None:
        return False
    if new.get("status", {}).get("observedGeneration") != new["metadata"]["generation"]:
        return False
    if dep.get("status", {}).get("observedGeneration") != dep["metadata"]["generation"]:
        return False
    want = dep["spec"]["replicas"]
    surge, unavailable = -(-want // 4), want // 4
    expected = want - min(unavailable if surge or unavailable else 1, want)
    return int(new.get("status", {}).get("readyReplicas", 0)) >= expected


def kubernetes_core_ready(dep: dict[str, Any]) -> bool:
    """kubernetes.core waiter.deployment_ready."""
    status = dep.get("status") or {}
    return bool(
        status
        and dep["spec"]["replicas"] == status.get("replicas", 0)
        and status.get("availableReplicas") == status.get("replicas")
        and status.get("observedGeneration") == dep["metadata"]["generation"]
        and not status.get("unavailableReplicas")
    )


def conditions(dep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in dep.get("status", {}).get("conditions", [])}


def rolled_out(apps: Apps, name: str, replica_sets: int) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """The Deployment once its rollout is complete and its old ReplicaSets are scaled to zero."""
    dep = apps.get(name)
    rss = apps.replica_sets(dep)
    progressing = conditions(dep).get("Progressing", {})
    old_gone = all(rs["spec"]["replicas"] == 0 and rs["status"]["replicas"] == 0 for rs in rss[:-1])
    done = (
        kubernetes_core_ready(dep)
        and helm_ready(dep, rss)
        and progressing.get("reason") == "NewReplicaSetAvailable"
        and len(rss) == replica_sets
        and old_gone
    )
    return (dep, rss) if done else None


def test_deployment_owns_a_hashed_replica_set_and_reports_ready(kube_target: KubeTarget, ns: str) -> None:
    apps = Apps(kube_target, ns)
    apps.api.create_namespaced_deployment(ns, deployment("web"))
    dep, rss = eventually(lambda: rolled_out(apps, "web", 1), TIMEOUT, "Deployment web rolled out")

    status = dep["status"]
    assert dep["metadata"]["annotations"][REVISION] == "1"
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"]) == (
        2,
        2,
        2,
        2,
    )
    assert "unavailableReplicas" not in status
    assert status["observedGeneration"] == dep["metadata"]["generation"] == 1
    (rs,) = rss
    meta = rs["metadata"]
    pod_hash = meta["labels"][HASH_LABEL]
    assert HASH_SHAPE.match(pod_hash), pod_hash
    assert meta["name"] == f"web-{pod_hash}"
    assert meta["labels"] == {"app": "web", HASH_LABEL: pod_hash}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "uid": dep["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    annotations = meta["annotations"]
    assert annotations[REVISION] == "1"
    # desired = spec.replicas, max = replicas + maxSurge (25% of 2 rounded up)
    assert annotations["deployment.kubernetes.io/desired-replicas"] == "2"
    assert annotations["deployment.kubernetes.io/max-replicas"] == "3"
    assert rs["spec"]["replicas"] == 2
    assert rs["spec"]["selector"] == {"matchLabels": {"app": "web", HASH_LABEL: pod_hash}}
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "web", HASH_LABEL: pod_hash}
    assert without_hash(rs["spec"]["template"]) == dep["spec"]["template"]
    assert {k: rs["status"][k] for k in ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")} == {
        "replicas": 2,
        "fullyLabeledReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
    }
    assert rs["status"]["observedGeneration"] == meta["generation"]
    cond = conditions(dep)
    assert (cond["Available"]["status"], cond["Available"]["reason"]) == ("True", "MinimumReplicasAvailable")
    assert cond["Available"]["message"] == "Deployment has minimum availability."
    assert (cond["Progressing"]["status"], cond["Progressing"]["reason"]) == ("True", "NewReplicaSetAvailable")
    assert cond["Progressing"]["message"] == f'ReplicaSet "{meta["name"]}" has successfully progressed.'


def test_template_change_scale_and_rollback_follow_revisions(kube_target: KubeTarget, ns: str) -> None:
    apps = Apps(kube_target, ns)
    apps.api.create_namespaced_deployment(ns, deployment("roll"))
    first_dep, (first,) = eventually(lambda: rolled_out(apps, "roll", 1), TIMEOUT, "first rollout")

    apps.patch("roll", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}})
    dep, (old, new) = eventually(lambda: rolled_out(apps, "roll", 2), TIMEOUT, "rollout of the new template")
    assert old["metadata"]["uid"] == first["metadata"]["uid"]
    assert old["metadata"]["annotations"][REVISION] == "1"
    assert new["metadata"]["annotations"][REVISION] == dep["metadata"]["annotations"][REVISION] == "2"
    assert new["metadata"]["labels"][HASH_LABEL] != old["metadata"]["labels"][HASH_LABEL]
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert dep["metadata"]["generation"] == dep["status"]["observedGeneration"] == 2
    # Still Available across the rollout: it never went below replicas - maxUnavailable.
    assert (
        conditions(dep)["Available"]["lastTransitionTime"] == conditions(first_dep)["Available"]["lastTransitionTime"]
    )
    assert (
        conditions(dep)["Progressing"]["message"]
        == f'ReplicaSet "{new["metadata"]["name"]}" has successfully progressed.'
    )

    apps.patch("roll", {"spec": {"replicas": 3}})

    def scaled() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        out = rolled_out(apps, "roll", 2)
        return out if out and out[0]["status"].get("availableReplicas") == 3 else None

    dep, (old, new) = eventually(scaled, TIMEOUT, "scale to 3")
    assert new["spec"]["replicas"] == 3
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "4"
    assert new["metadata"]["annotations"][REVISION] == "2"  # scaling is no new revision

    apps.patch("roll", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}})

    def rolled_back() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        out = rolled_out(apps, "roll", 2)
        return out if out and out[1][-1]["metadata"]["uid"] == first["metadata"]["uid"] else None

    dep, (previous, current) = eventually(rolled_back, TIMEOUT, "rollback to the first template")
    assert dep["metadata"]["annotations"][REVISION] == "3"
    assert current["metadata"]["annotations"][REVISION] == "3"
    assert current["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert current["spec"]["replicas"] == 3
    assert previous["metadata"]["uid"] == new["metadata"]["uid"]


def test_recreate_scales_the_old_replica_set_down_first(kube_target: KubeTarget, ns: str) -> None:
    apps = Apps(kube_target, ns)
    apps.api.create_namespaced_deployment(ns, deployment("recreate", strategy={"type": "Recreate"}))
    eventually(lambda: rolled_out(apps, "recreate", 1), TIMEOUT, "first rollout")
    apps.patch("recreate", {"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}})
    dep, (old, new) = eventually(lambda: rolled_out(apps, "recreate", 2), TIMEOUT, "recreate rollout")
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 2)
    # Recreate: no surge, so the new ReplicaSet's max-replicas is the count itself.
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "2"
    assert dep["metadata"]["annotations"][REVISION] == "2"


def test_paused_deployment_rolls_out_nothing_until_resumed(kube_target: KubeTarget, ns: str) -> None:
    apps = Apps(kube_target, ns)
    apps.api.create_namespaced_deployment(ns, deployment("paused"))
    eventually(lambda: rolled_out(apps, "paused", 1), TIMEOUT, "first rollout")
    apps.patch(
        "paused",
        {"spec": {"paused": True, "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}},
    )

    def paused() -> dict[str, Any] | None:
        dep = apps.get("paused")
        progressing = conditions(dep).get("Progressing", {})
        observed = dep.get("status", {}).get("observedGeneration") == dep["metadata"]["generation"]
        return dep if observed and progressing.get("reason") == "DeploymentPaused" else None

    dep = eventually(paused, TIMEOUT, "the pause to be observed")
    progressing = conditions(dep)["Progressing"]
    assert (progressing["status"], progressing["message"]) == ("Unknown", "Deployment is paused")
    assert len(apps.replica_sets(dep)) == 1
    assert helm_new_replica_set(dep, apps.replica_sets(dep)) is None  # helm --wait would wait here

    apps.patch("paused", {"spec": {"paused": False}})
    dep, (old, new) = eventually(lambda: rolled_out(apps, "paused", 2), TIMEOUT, "rollout after resume")
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert old["spec"]["replicas"] == 0


def test_deployment_deletion_collects_replica_sets_and_orphans_are_adopted(kube_target: KubeTarget, ns: str) -> None:
    apps = Apps(kube_target, ns)
    apps.api.create_namespaced_deployment(ns, deployment("gc"))
    _dep, (rs,) = eventually(lambda: rolled_out(apps, "gc", 1), TIMEOUT, "rollout")
    apps.api.delete_namespaced_deployment("gc", ns, propagation_policy="Orphan")
    wait_deleted(lambda: apps.api.read_namespaced_deployment("gc", ns), TIMEOUT, "orphaning delete")

    def orphaned() -> dict[str, Any] | None:
        found = [r for r in apps.replica_sets() if r["metadata"]["uid"] == rs["metadata"]["uid"]]
        return found[0] if found and not found[0]["metadata"].get("ownerReferences") else None

    eventually(orphaned, TIMEOUT, "the ReplicaSet to lose its owner")

    apps.api.create_namespaced_deployment(ns, deployment("gc"))
    dep, (adopted,) = eventually(lambda: rolled_out(apps, "gc", 1), TIMEOUT, "adoption")
    assert adopted["metadata"]["uid"] == rs["metadata"]["uid"]
    assert adopted["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]

    apps.api.delete_namespaced_deployment("gc", ns, propagation_policy="Foreground")
    wait_deleted(lambda: apps.api.read_namespaced_deployment("gc", ns), TIMEOUT, "foreground delete")
    assert apps.replica_sets() == []  # Foreground: the owner goes last

    apps.api.create_namespaced_deployment(ns, deployment("bg"))
    eventually(lambda: rolled_out(apps, "bg", 1), TIMEOUT, "rollout")
    apps.api.delete_namespaced_deployment("bg", ns)  # Background, the apps/v1 default
    eventually(lambda: apps.replica_sets() == [], TIMEOUT, "garbage collection of the ReplicaSet")


@pytest.mark.emulator_only
def test_held_deployment_is_not_ready_for_helm_and_times_out(kube_target: KubeTarget, ns: str) -> None:
    apps = Apps(kube_target, ns)
    held = deployment("held", progressDeadlineSeconds=1)
    held["metadata"]["annotations"] = {HOLD_ANNOTATION: "true"}
    apps.api.create_namespaced_deployment(ns, held)

    def timed_out() -> dict[str, Any] | None:
        dep = apps.get("held")
        return dep if conditions(dep).get("Progressing", {}).get("reason") == "ProgressDeadlineExceeded" else None

    dep = eventually(timed_out, 10, "ProgressDeadlineExceeded")
    (rs,) = apps.replica_sets(dep)
    assert conditions(dep)["Progressing"]["status"] == "False"
    assert (
        conditions(dep)["Progressing"]["message"] == f'ReplicaSet "{rs["metadata"]["name"]}" has timed out progressing.'
    )
    assert conditions(dep)["Available"]["status"] == "False"
    assert rs["status"]["replicas"] == 2
    assert "readyReplicas" not in rs["status"]
    assert dep["status"]["unavailableReplicas"] == 2
    assert not helm_ready(dep, [rs])
    assert not kubernetes_core_ready(dep)

    apps.patch("held", {"metadata": {"annotations": {HOLD_ANNOTATION: None}}})
    dep, _rss = eventually(lambda: rolled_out(apps, "held", 1), 10, "the released rollout")
    assert conditions(dep)["Progressing"]["status"] == "True"
