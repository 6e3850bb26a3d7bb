# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that give the ``vke_cluster`` role the input checks and the GPU model of ``module_utils/_vultr``.

Why filters and not a module: the checks need no request and no credentials, must hold in check mode,
and must run before any module does; a filter costs no module start-up. The rules themselves are the
ones ``vke_preflight`` applies (``preflight.py``), so the role and the site preflight cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._vultr.preflight import gpu_model
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.role_checks import vke_cluster_problems


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar files vke_cluster_problems.yml and vke_gpu_model.yml.
        return {"vke_cluster_problems": _problems, "vke_gpu_model": gpu_model}


def _problems(gpu_pools: Any, label: Any = None, kubeconfig_dir: Any = None, state: str = "present") -> list[str]:
    """One ``variable: what is wrong`` line per problem (an assert's message joins them)."""
    found = vke_cluster_problems(gpu_pools, label=label, kubeconfig_dir=kubeconfig_dir, state=str(state))
    return [f"{p.field}: {p.msg}" for p in found]
