# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``vke_cluster_info`` and ``vultr_gpu_plan_info``: read-only views.

Why ``type=all`` for GPU plans: whole-GPU ``vcg-*`` plans report ``type: vdm`` and only fractional
slices report ``vcg``, so ``type=vcg`` alone misses most of them; the id prefix is what is reliable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule

from .args import client_from_params
from .cluster import is_owned
from .cluster_ops import _kubeconfig, list_clusters
from .plans import describe_gpu_plan


def run_vke_cluster_info(module: MetalplaneModule) -> dict[str, Any]:
    params = module.params
    if params.get("kubeconfig_path") and not (params.get("label") or params.get("id")):
        raise InputError("kubeconfig_path", "needs label or id, so that exactly one cluster is selected")
    client = client_from_params(params)
    clusters = list_clusters(client)
    if params.get("id"):
        clusters = [c for c in clusters if c.get("id") == params["id"]]
    if params.get("label"):
        clusters = [c for c in clusters if c.get("label") == params["label"]]
    result: dict[str, Any] = {"changed": False, "clusters": [{**c, "owned": is_owned(c)} for c in clusters]}
    if params.get("kubeconfig_path"):
        if len(clusters) != 1:
            raise InputError(
                "kubeconfig_path", f"the selection matches {len(clusters)} clusters; it must match exactly one"
            )
        path = Path(params["kubeconfig_path"])
        result["changed"] = _kubeconfig(client, clusters[0], path, module.check_mode, module)
        result["kubeconfig_path"] = str(path)
    result["api_requests"] = client.counter.as_dict()
    return result


def run_gpu_plan_info(module: MetalplaneModule) -> dict[str, Any]:
    params = module.params
    client = client_from_params(params)
    plans = [d for d in (describe_gpu_plan(p) for p in client.list_all("/plans", "plans", {"type": "all"})) if d]
    wanted = set(params.get("plan") or [])
    if wanted:
        plans = [p for p in plans if p["id"] in wanted]
    region = params.get("region")
    if region:
        available = set(client.call("GET", f"/regions/{region}/availability").get("available_plans") or [])
        for plan in plans:
            plan["available"] = plan["id"] in available
        if params["available_only"]:
            plans = [p for p in plans if p["available"]]
    plans.sort(key=lambda p: p["id"])
    return {
        "changed": False,
        "plans": plans,
        "missing": sorted(wanted - {p["id"] for p in plans}),
        "api_requests": client.counter.as_dict(),
    }
