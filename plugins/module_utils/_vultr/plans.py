# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU plan ids and objects -> GPU model, count, VRAM per GPU and in total.

Why: Vultr has no GPU-count field. A plan id reads ``vcg-<gpu>-<vcpu>c-<ram>g[b]-<vram>vram``
(``vcg-a100-96c-960g-640vram`` is 8 x A100 80 GB; ``vcg-a16-2c-8g-2vram`` is a 2 GB vGPU slice);
the plan object may add ``gpu_vram_gb`` (total) and ``gpu_type``. Count = total VRAM / VRAM of
one whole GPU of that model; below one GPU the plan is a fractional slice. Ids are irregular
(``-1914gb-``), so parsing is lenient. Pure functions, unit-tested.
"""

from __future__ import annotations

import re
from typing import Any

GPU_PLAN_PREFIX = "vcg-"  # a "GPU pool" is a node pool whose plan starts with this

# VRAM (GB) of one whole GPU per model, as sold on Vultr (public product tables).
GPU_VRAM_GB: dict[str, int] = {
    "a16": 16,
    "a40": 48,
    "a100": 80,
    "l40s": 48,
    "h100": 80,
    "h200": 141,
    "b200": 192,
    "mi300x": 192,
    "mi325x": 256,
    "gh200": 96,
}

_ID_RE = re.compile(
    r"^vcg-(?P<model>[a-z0-9]+)-(?P<vcpu>\d+)c-(?P<ram>\d+)gb?-(?P<vram>\d+)vram$",
    re.IGNORECASE,
)


def is_gpu_plan(plan_id: str) -> bool:
    return plan_id.lower().startswith(GPU_PLAN_PREFIX)


def parse_plan_id(plan_id: str) -> dict[str, Any] | None:
    """Fields encoded in a ``vcg-*`` id, or None if the id does not follow the pattern."""
    match = _ID_RE.match(plan_id.strip())
    if not match:
        return None
    return {
        "gpu_model": match["model"].lower(),
        "vcpu_count": int(match["vcpu"]),
        "ram_gb": int(match["ram"]),
        "gpu_vram_gb": int(match["vram"]),
    }


def gpu_model_from_type(gpu_type: str | None) -> str | None:
    """``NVIDIA_A100`` / ``AMD_MI300X`` -> ``a100`` / ``mi300x``."""
    if not gpu_type:
        return None
    return gpu_type.split("_", 1)[-1].lower().replace("-", "")


def describe_gpu_plan(plan: dict[str, Any]) -> dict[str, Any] | None:
    """A GPU plan summary (None for a non-GPU plan)."""
    plan_id = str(plan.get("id", ""))
    if not is_gpu_plan(plan_id):
        return None
    parsed = parse_plan_id(plan_id) or {}
    model = gpu_model_from_type(plan.get("gpu_type")) or parsed.get("gpu_model")
    total = plan.get("gpu_vram_gb") or parsed.get("gpu_vram_gb")
    per_gpu_full = GPU_VRAM_GB.get(model or "")
    count: float | None = None
    fractional = False
    if total and per_gpu_full:
        ratio = total / per_gpu_full
        fractional = ratio < 1
        count = 1 if fractional else round(ratio)
    vram_per_gpu = total if fractional or not count else round(total / count)
    return {
        "id": plan_id,
        "gpu_model": model,
        "gpu_type": plan.get("gpu_type"),
        "gpu_count": count,
        "fractional": fractional,
        "gpu_vram_gb_per_gpu": vram_per_gpu,
        "gpu_vram_gb_total": total,
        "vcpu_count": plan.get("vcpu_count", parsed.get("vcpu_count")),
        "ram_mb": plan.get("ram", parsed["ram_gb"] * 1024 if parsed.get("ram_gb") else None),
        "monthly_cost": plan.get("monthly_cost"),
        "hourly_cost": plan.get("hourly_cost"),
        "type": plan.get("type"),
        "locations": list(plan.get("locations") or []),
    }


def gpu_count_problem(described: dict[str, Any] | None, gpu_count: int) -> str | None:
    """Why a plan does not give ``gpu_count`` GPUs per node, or None when it does (or cannot be told).

    ``described``: the plan's :func:`describe_gpu_plan` summary, None when the catalogue does not list
    it as a GPU plan. A plan whose GPU count is unknown (a model missing from ``GPU_VRAM_GB``) passes.
    """
    if described is None:
        return "is not a GPU plan Vultr lists"
    have = described.get("gpu_count")
    if have is None or int(have) == gpu_count:
        return None
    return f"has {have} GPU(s) per node, gpu_count says {gpu_count}"
