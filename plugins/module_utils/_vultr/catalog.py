# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only catalogue checks done before anything is created: region, plans, versions.

Why: an unknown region or a plan not sold in the region would otherwise fail in the middle of a
create (a 400 at best, a half-built cluster at worst). These reads turn them into an ``InputError``
naming the option, with the valid choices, and cost requests only on the create path.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

from .client import VultrClient
from .plans import describe_gpu_plan, gpu_count_problem
from .versions import resolve_version

KUBERNETES_OPTION = "kubernetes"  # region ``options`` entry of regions that offer VKE


def check_region(client: VultrClient, region: str | None, field: str = "region") -> str:
    if not region:
        raise InputError(field, "is required to create a cluster (a Vultr region id such as ewr)")
    regions = client.list_all("/regions", "regions")
    found = next((r for r in regions if r.get("id") == region), None)
    if found is None:
        known = ", ".join(sorted(str(r.get("id")) for r in regions))
        raise InputError(field, f"unknown region {region!r}; known regions: {known}")
    options = found.get("options")
    if options is not None and KUBERNETES_OPTION not in options:
        raise InputError(field, f"region {region!r} does not offer Vultr Kubernetes Engine")
    return region


def check_plans_available(client: VultrClient, region: str, plans: Mapping[str, str]) -> None:
    """Each ``{option: plan}`` must be sold in ``region`` (``GET /regions/{id}/availability``)."""
    if not plans:
        return
    available = set(client.call("GET", f"/regions/{region}/availability").get("available_plans") or [])
    for field, plan in plans.items():
        if plan not in available:
            gpu = sorted(p for p in available if p.startswith("vcg-"))
            hint = f"; GPU plans available there: {', '.join(gpu)}" if plan.startswith("vcg-") and gpu else ""
            raise InputError(field, f"plan {plan!r} is not available in region {region!r}{hint}")


def check_gpu_counts(client: VultrClient, wanted: Mapping[str, tuple[str, int]]) -> None:
    """Each ``{option: (plan, gpu_count)}``: the plan gives that many GPUs per node (``GET /plans``).

    Vultr has no GPU-count field: the count is derived from the plan's VRAM (``plans.describe_gpu_plan``).
    ``type=all`` because whole-GPU plans report ``type: vdm``; only fractional slices say ``vcg``.
    """
    if not wanted:
        return
    described = {
        d["id"]: d for d in (describe_gpu_plan(p) for p in client.list_all("/plans", "plans", {"type": "all"})) if d
    }
    for field, (plan, gpu_count) in wanted.items():
        problem = gpu_count_problem(described.get(plan), gpu_count)
        if problem is not None:
            raise InputError(field, f"plan {plan!r} {problem}")


def resolve(client: VultrClient, requested: str) -> str:
    versions = client.call("GET", "/kubernetes/versions").get("versions") or []
    return resolve_version(requested, versions)
