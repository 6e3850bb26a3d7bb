# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``metal_preflight`` for clusters with ``provisioner: metal3``: what ``metal3_host`` would do, decided read-only.

Why its own planner: with Metal3 the pool is BareMetalHosts and the claim is their ``consumerRef``, not a Lease, so
planning from Leases (as for the redfish provisioner) would promise hosts Metal3 has given to CAPM3, and miss a
BareMetalHost someone else registered under a pool host's name. So this reads the namespace's BareMetalHosts once
and runs ``metal3_host``'s own pure steps over them: ``plan_registration`` (a foreign host under a pool host's
name with another boot MAC is the same error) and ``choose`` (the host the cluster holds, else the first free one by
name whose facts fit; hosts still to be registered count, as ``metal3_host`` would register and then claim them).
Clusters sharing a pool never get the same host. The image is checked with ``metal3_host``'s validator, so a URL
without checksum or an unknown format fails here, naming the field, before anything is registered.

The BMCs are not probed for these clusters: Metal3 owns them, and its BareMetalHost status is the reading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import ConflictError, InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.problems import Problem
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import (
    Host,
    Requirements,
    fact_mismatches,
)

from . import bmh as b
from . import progress as p
from .run import DEFAULT_NAMESPACE, Inputs, choose, generation_of, plan_registration

KEYS = ("kubeconfig", "namespace", "host_selector", "image")


@dataclass(frozen=True)
class Metal3Settings:
    """A metal3 cluster's entry: where its BareMetalHosts live, which are the pool's, and the image."""

    kubeconfig: str | None
    namespace: str
    selector: dict[str, str]
    image: b.Image | None


@dataclass
class Metal3Plan:
    """The outcome for one cluster, in ``metal_preflight``'s vocabulary (``claim``: held, new, release, none)."""

    claim: str = "none"
    host: str | None = None  # the pool host's name (None when the BareMetalHost is not one the pool lists)
    bare_metal_host: str | None = None  # namespace/name
    generation: int | None = None
    releases: list[str] = dataclasses.field(default_factory=list)
    skipped: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def check_entry(problems: list[Problem], where: str, value: Any, *, present: bool) -> Metal3Settings:
    """The ``metal3`` mapping of a cluster entry (the image only for a present cluster)."""
    entry = value if isinstance(value, Mapping) else {}
    if value is not None and not isinstance(value, Mapping):
        problems.append(
            Problem(f"{where}.metal3", f"must be a mapping ({', '.join(KEYS)}), got {type(value).__name__}")
        )
    namespace = str(entry.get("namespace") or DEFAULT_NAMESPACE)
    if len(namespace) > b.DNS_SUBDOMAIN_MAX or not b.DNS_SUBDOMAIN_RE.match(namespace):
        problems.append(
            Problem(
                f"{where}.metal3.namespace",
                f"{namespace!r} is not a namespace name (lower-case letters, digits, '-' and '.')",
            )
        )
    raw_selector = entry.get("host_selector") or {}
    selector: dict[str, str] = {}
    if not isinstance(raw_selector, Mapping):
        problems.append(Problem(f"{where}.metal3.host_selector", "must be a mapping of label names to values"))
    else:
        selector = {str(k): str(v) for k, v in raw_selector.items()}
    image = None
    if present:
        try:
            image = b.parse_image(entry.get("image"), "image")
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, f"{where}.metal3"))
    kubeconfig = str(entry.get("kubeconfig") or "") or None
    return Metal3Settings(kubeconfig=kubeconfig, namespace=namespace, selector=selector, image=image)


def check_hosts(
    problems: list[Problem], pool_where: str, entry_index: Mapping[str, int], hosts: Sequence[Host]
) -> None:
    """Each pool host must have a Metal3 BMC address (a generic Redfish BMC needs its system_path)."""
    for host in hosts:
        try:
            b.host_name(host.name)
            b.bmc_address(host.bmc_url, host.personality, host.system_path)
        except InputError as exc:
            problems.append(Problem.from_input_error(exc, f"{pool_where}.hosts[{entry_index[host.name]}]"))


def _inputs(
    cluster: str, pool: str, hosts: Sequence[Host], requirements: Requirements, settings: Metal3Settings
) -> Inputs:
    return Inputs(
        cluster=cluster,
        namespace=settings.namespace,
        pool=pool,
        hosts=list(hosts),
        requirements=requirements,
        selector=settings.selector or {b.POOL_LABEL: pool},
        boot_mode="UEFI",
        cleaning=b.CLEANING_MODES[0],
        inspection_mode=None,
        disable_cert_verification=False,
        claimer="metal_preflight",
        delete_host=False,
        wait=False,
        wait_timeout=0,
        state_timeouts=dict(p.DEFAULT_STATE_TIMEOUTS),
    )


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _selected(obj: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def plan_cluster(
    *,
    cluster: str,
    where: str,
    present: bool,
    pinned: str | None,
    pool: str,
    pool_where: str,
    entry_index: Mapping[str, int],
    hosts: Sequence[Host],
    requirements: Requirements,
    settings: Metal3Settings,
    in_namespace: Sequence[Mapping[str, Any]],
    planned: dict[tuple[str, str], str],
) -> tuple[Metal3Plan, list[Problem]]:
    """What ``metal3_host`` would do for this cluster, given every BareMetalHost of the namespace (read once)."""
    inputs = _inputs(cluster, pool, hosts, requirements, settings)
    by_name = {_name(h): h for h in in_namespace}
    pool_name_of = {b.host_name(h.name): h.name for h in hosts}
    plan = Metal3Plan()
    selected = [h for h in in_namespace if _selected(h, inputs.selector)]
    held = sorted((h for h in selected if b.held_by(h, cluster)), key=_name)
    if not present:
        plan.releases = [_name(h) for h in held]
        plan.claim = "release" if held else "none"
        return plan, []
    try:
        registration = plan_registration(inputs, {name: by_name[name] for name in pool_name_of if name in by_name})
    except ConflictError as exc:
        index = next((i for name, i in entry_index.items() if b.host_name(name) == exc.details.get("host")), None)
        field = f"{pool_where}.hosts[{index}]" if index is not None else f"{where}.pool"
        return plan, [Problem(field, exc.msg.split(": ", 1)[-1])]
    if held:
        chosen = held[0]
        plan.claim, plan.generation = "held", generation_of(chosen)
    else:
        to_register = [r.host() for r in registration.create]
        candidates = [
            h
            for h in [*selected, *to_register]
            if (pool, _name(h)) not in planned and (pinned is None or _name(h) == b.host_name(pinned))
        ]
        chosen, assessed = choose(candidates, inputs, {b.host_name(h.name): h.facts for h in hosts})
        if chosen is None:
            # metal3_host registers these, waits for them to become available, then claims the first by name
            fresh = sorted((h for h in candidates if _name(h) in {_name(r) for r in to_register}), key=_name)
            chosen = next((h for h in fresh if not _mismatched(h, inputs, hosts)), None)
        plan.skipped = [
            {"name": c.name, "status": "unavailable", "reason": c.reason}
            for c in assessed
            if not c.usable and (chosen is None or c.name != _name(chosen)) and not c.on_its_way
        ]
        plan.skipped += [
            {"name": _name(h), "status": "planned", "reason": f"planned for cluster {planned[(pool, _name(h))]!r}"}
            for h in [*selected, *to_register]
            if (pool, _name(h)) in planned
        ]
        if chosen is None:
            reasons = "; ".join(f"{s['name']}: {s['reason']}" for s in plan.skipped) or "no BareMetalHost matches"
            field = f"{where}.host" if pinned else f"{where}.pool"
            return plan, [
                Problem(
                    field,
                    f"no free BareMetalHost of pool {pool!r} (namespace {settings.namespace}, selector "
                    f"{','.join(f'{k}={v}' for k, v in sorted(inputs.selector.items()))}) fits cluster {cluster!r}: "
                    f"{reasons}; register or release one",
                )
            ]
        plan.claim, plan.generation = "new", 1
        planned[(pool, _name(chosen))] = cluster
    plan.bare_metal_host = f"{settings.namespace}/{_name(chosen)}"
    plan.host = pool_name_of.get(_name(chosen))
    return plan, []


def _mismatched(host: Mapping[str, Any], inputs: Inputs, hosts: Sequence[Host]) -> bool:
    facts = next((h.facts for h in hosts if b.host_name(h.name) == _name(host)), {})
    return bool(fact_mismatches(inputs.requirements, facts))
