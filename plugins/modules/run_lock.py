# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hold a cluster for one run: a renewed Lease on the control plane, so two runs never converge it at once."""

from __future__ import annotations

DOCUMENTATION = r"""
module: run_lock
short_description: Hold a cluster for this run so that a second run waits (a renewed, expiring Lease)
version_added: 0.1.0
description:
  - Two runs of C(site.yml) over one inventory (a scheduled reconcile overlapping a manual run) would converge the
    same cluster at once. With this lock the second run waits for the first, then finds nothing left to do.
  - The lock is a C(coordination.k8s.io/v1) Lease C(metalplane-run.<cluster>) in O(namespace) on the Modelplane
    control plane, the place every controller of the inventory already reaches. Its C(holderIdentity) names the
    C(ansible-playbook) process (user, host, PID); annotations add what tells a gone run from a live one.
  - Unlike a host claim, it expires. After taking it the module starts a small detached process that renews it
    every third of O(lease_seconds) while the run's C(ansible-playbook) lives and deletes it once that process is
    gone, so a run that ends, fails or is killed frees its clusters within seconds. If the controller itself
    dies, a waiting run takes the lock after seeing it unrenewed for O(lease_seconds) on its own clock; a run on
    the same machine takes a gone run's lock at once.
  - A Lease of that name that this collection did not write is never taken or deleted.
  - Needs C(/proc) on the controller to find the C(ansible-playbook) process (Linux, AWX/AAP execution
    environments). Without it the lock is held by the task's parent process only, that is released when the
    task ends, and a warning says so.
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.modelplane
attributes:
  check_mode:
    support: full
    details:
      - Reads the Lease and says whether the lock would be taken or waited for; writes nothing and never waits.
  diff_mode:
    support: none
options:
  cluster:
    description:
      - The cluster this run converges (a DNS label, the inventory host name of C(site.yml)).
      - One of O(cluster) and O(clusters) is required.
    type: str
  clusters:
    description:
      - Several clusters in one module run (C(site.yml) locks every cluster of the play with one task, run once),
        taken in sorted order, so that two runs locking overlapping sets never wait for each other in a cycle.
        O(wait_timeout) is one deadline for all of them, and one renewer holds them all.
      - A cluster whose lock another run still holds at the deadline does not fail the task; its entry in
        RV(clusters) says C(acquired=false) with the holder in C(msg), so a playbook fails only that cluster.
    type: list
    elements: str
  namespace:
    description: Namespace of the Lease on the control plane (where the host claims live too).
    type: str
    default: modelplane-system
  state:
    description: V(present) takes the lock (or keeps it), waiting for another run's; V(absent) releases this run's.
    type: str
    choices: [present, absent]
    default: present
  lease_seconds:
    description:
      - C(leaseDurationSeconds) of the Lease; renewed every third of it. How long a lock outlives a controller that
        died with its renewer. At least 3.
    type: int
    default: 60
  wait_timeout:
    description: Seconds to wait for another run's lock before failing, naming its holder. V(0) fails at once.
    type: int
    default: 3600
  renew:
    description:
      - Start the renewer. V(false) leaves a lock that expires after O(lease_seconds) unless taken again (for a run
        shorter than that, or a test).
    type: bool
    default: true
notes:
  - C(site.yml) takes this lock for every cluster after its preflights (C(metalplane_run_lock), default V(true)),
    and before anything is created, claimed or deleted.
seealso:
  - module: metalplane.inference.host_claim
    description: The durable claim of a bare-metal host, which outlives a killed run on purpose.
"""

EXAMPLES = r"""
- name: Hold the cluster for this run (a second run waits for it)
  metalplane.inference.run_lock:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: "{{ inventory_hostname }}"
  delegate_to: localhost

- name: Fail at once when another run holds it
  metalplane.inference.run_lock:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: gpu-ewr-1
    wait_timeout: 0

- name: Hold every cluster of the play in one module run, with one renewer (as site.yml does)
  metalplane.inference.run_lock:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    clusters: "{{ ansible_play_hosts }}"
  run_once: true
  register: locks   # locks.clusters[inventory_hostname].acquired

- name: Release it before the run ends (the renewer would, when the run ends)
  metalplane.inference.run_lock:
    kubeconfig: "{{ modelplane_kubeconfig }}"
    cluster: gpu-ewr-1
    state: absent
"""

RETURN = r"""
acquired:
  description: Whether this run holds the lock now (false in check mode).
  returned: state is present
  type: bool
lock:
  description: The lock held, C(namespace), C(name), C(holder), C(acquired) and C(renewed) times, C(lease_seconds).
  returned: when acquired
  type: dict
  sample:
    namespace: modelplane-system
    name: metalplane-run.gpu-ewr-1
    holder: awx@automation-job-42 pid 7
    acquired: "2026-12-06T03:10:00.000000Z"
    renewed: "2026-12-06T03:10:00.000000Z"
    lease_seconds: 60
took_over:
  description: Why the lock of another holder was taken (it was released, its run ended here, it was not renewed).
  returned: state is present
  type: str
waited_for:
  description: The holder this run waited for, if any.
  returned: when acquired
  type: str
waited_seconds:
  description: Seconds spent waiting for another run's lock.
  returned: when acquired
  type: float
would_wait_for:
  description: In check mode, the lock another run holds.
  returned: in check mode when another run holds the lock
  type: dict
renewer_pid:
  description: PID of the process that renews the lock and releases it when the run ends; null without O(renew).
  returned: when acquired
  type: int
released:
  description: Whether this run's lock was deleted (with O(clusters), whether any was).
  returned: state is absent
  type: bool
clusters:
  description:
    - With O(clusters), per cluster, what O(cluster) would return (C(acquired), C(took_over), C(waited_for),
      C(lock), or C(released)); a lock still held by another run at the deadline has C(acquired=false),
      C(failed=true) and C(msg).
  returned: when O(clusters) is given
  type: dict
"""

import contextlib
import time
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, WaitTimeout
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._kube import client as kube_client
from ansible_collections.metalplane.inference.plugins.module_utils._kube import object_store
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.validate import dns_label
from ansible_collections.metalplane.inference.plugins.module_utils._site import run_lock
from ansible_collections.metalplane.inference.plugins.module_utils._site.renewer import start_detached

# Renewed every third of the duration, at most once a second.
MIN_LEASE_SECONDS = 3


def argument_spec() -> dict[str, Any]:
    return {
        **modelplane_argument_spec(),
        "cluster": {"type": "str"},
        "clusters": {"type": "list", "elements": "str"},
        "namespace": {"type": "str", "default": "modelplane-system"},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "lease_seconds": {"type": "int", "default": 60},
        "wait_timeout": {"type": "int", "default": 3600},
        "renew": {"type": "bool", "default": True},
    }


def lock(module: MetalplaneModule) -> dict[str, Any]:
    params = module.params
    names = cluster_names(params)
    namespace = dns_label("namespace", params["namespace"])
    if params["lease_seconds"] < MIN_LEASE_SECONDS:
        raise InputError("lease_seconds", f"must be at least {MIN_LEASE_SECONDS}, got {params['lease_seconds']}")
    if not params.get("kubeconfig"):
        raise InputError("kubeconfig", "required: the Modelplane control plane's kubeconfig (or MODELPLANE_KUBECONFIG)")
    me, found = run_lock.this_run()
    many = params.get("clusters") is not None
    with object_store.opened_store(module, None, object_store.connect) as store:
        if params["state"] == "absent":
            released = {
                name: run_lock.release(store, namespace, name, me, check_mode=module.check_mode) for name in names
            }
            result: dict[str, Any] = {"changed": any(released.values()), "released": any(released.values())}
            if many:
                result["clusters"] = {name: {"released": done} for name, done in released.items()}
            return result
        outcomes = acquire_all(store, module, namespace, names, me)
    held = [request for request, outcome in outcomes if outcome.get("acquired")]
    renewer_pid = None
    if held and params["renew"]:
        if not found:
            module.warn(
                "run_lock: no ansible-playbook process found above this module (no /proc?): the lock is released"
                " when this task ends"
            )
        renewer_pid = start_detached(lambda: renew(dict(params), held))
    for _request, outcome in outcomes:
        outcome.pop("resource_version", None)
        if outcome.get("acquired"):
            outcome["renewer_pid"] = renewer_pid
    if not many:
        return outcomes[0][1]
    return {
        "changed": any(outcome.get("changed") for _r, outcome in outcomes),
        "acquired": all(outcome.get("acquired") for _r, outcome in outcomes),
        "renewer_pid": renewer_pid,
        "clusters": {request.cluster: outcome for request, outcome in outcomes},
    }


def cluster_names(params: dict[str, Any]) -> list[str]:
    """``cluster``, or ``clusters`` sorted and without repeats (the order every run takes them in)."""
    if params.get("clusters") is not None:
        if params.get("cluster"):
            raise InputError("clusters", "give cluster or clusters, not both")
        names = [dns_label(f"clusters[{index}]", name) for index, name in enumerate(params["clusters"])]
        return sorted(set(names))
    if not params.get("cluster"):
        raise InputError("cluster", "required (or clusters): the cluster this run converges")
    return [dns_label("cluster", params["cluster"])]


def acquire_all(
    store: Any, module: MetalplaneModule, namespace: str, names: list[str], me: run_lock.RunIdentity
) -> list[tuple[run_lock.LockRequest, dict[str, Any]]]:
    """Each lock in turn under one deadline. With ``clusters``, a lock still held at the deadline is an outcome, not a
    failure; any other error releases what this run took here before it is raised."""
    params = module.params
    many = params.get("clusters") is not None
    deadline = time.monotonic() + params["wait_timeout"]
    outcomes: list[tuple[run_lock.LockRequest, dict[str, Any]]] = []
    try:
        for name in names:
            remaining = max(0, int(deadline - time.monotonic()))
            request = run_lock.LockRequest(namespace, name, me, params["lease_seconds"], remaining)
            try:
                outcome = run_lock.acquire(store, request, check_mode=module.check_mode)
            except WaitTimeout as exc:
                if not many:
                    raise
                outcome = {"changed": False, "acquired": False, "failed": True, "msg": exc.msg}
            outcomes.append((request, outcome))
    except Exception:
        if not module.check_mode:
            for request, outcome in outcomes:
                if outcome.get("acquired") and outcome.get("changed"):
                    with contextlib.suppress(Exception):
                        run_lock.release(store, namespace, request.cluster, me)
        raise
    return outcomes


def renew(params: dict[str, Any], requests: list[run_lock.LockRequest]) -> str:
    """The renewer's work, in the detached process: a connection of its own, renewals until the run is gone.

    Everything it runs is imported before the fork (``kube_client`` above): the module's own files are removed
    when the module exits, so the renewer could not import one later.
    """
    kube_client.forget_parents_temp_files()
    store = object_store.connect(params)
    try:
        return run_lock.renew_while_alive(store, requests, alive=lambda: run_lock.process_alive(requests[0].me))
    finally:
        store.close()
        kube_client.remove_temp_files()


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(lock)


if __name__ == "__main__":
    main()
