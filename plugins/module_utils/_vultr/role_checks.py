# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vke_cluster role's input checks: every problem of its variables, named by variable, with no request.

Why here and not in the role's Jinja: the rules a GPU pool must follow (name, ``vcg-`` plan, GPU model,
counts, autoscaler bounds, unique names that are not the system pool's) are the ones ``vke_preflight``
applies to a site inventory, so both call the same functions of ``preflight.py``; only the names in the
messages differ (``vke_cluster_gpu_pools[1] ("l40s-1x").node_quantity`` here, ``<cluster>.gpu_pools[l40s-1x]
.node_quantity`` there). The role's check runs with no credentials and in check mode, so the GPU model is
checked against the plan id here; ``vke_preflight`` checks it against the plan catalogue.
"""

from __future__ import annotations

import json
import os.path
from collections.abc import Mapping
from typing import Any

from .node_pool import is_vke_label
from .preflight import Problem, check_plan_id, check_pool_list

# The role's variable names, as its meta/argument_specs.yml declares them (messages name them).
LABEL_VAR = "vke_cluster_label"
KUBECONFIG_DIR_VAR = "vke_cluster_kubeconfig_dir"
POOLS_VAR = "vke_cluster_gpu_pools"


def _shown(value: Any) -> str:
    """A value as the user wrote it, quoted as YAML/JSON would: ``"bad/label"``."""
    return json.dumps(value if isinstance(value, (str, int, float, bool, type(None))) else str(value))


def pool_where(index: int, pool: Any) -> str:
    """``vke_cluster_gpu_pools[1] ("l40s-1x")``: the item and, when it has one, its name."""
    name = pool.get("name") if isinstance(pool, Mapping) else None
    return f"{POOLS_VAR}[{index}]" + (f" ({_shown(name)})" if name else "")


def vke_cluster_problems(gpu_pools: Any, *, label: Any, kubeconfig_dir: Any, state: str = "present") -> list[Problem]:
    """Every problem of the role's variables that needs no request; the pools only when ``state`` is present.

    A teardown does not read the pools, so a pool description that has gone stale cannot block it.
    """
    problems: list[Problem] = []
    if not isinstance(label, str) or not is_vke_label(label):
        problems.append(
            Problem(
                LABEL_VAR,
                "must be 1-63 letters, digits, '.', '_' or '-' starting with a letter or digit (it is also the "
                f"kubeconfig file name), got {_shown(label)}",
            )
        )
    if not isinstance(kubeconfig_dir, str) or not os.path.isabs(os.path.expanduser(kubeconfig_dir)):
        problems.append(Problem(KUBECONFIG_DIR_VAR, f"must be an absolute path, got {_shown(kubeconfig_dir)}"))
    if state != "present":
        return problems
    if not isinstance(gpu_pools, list):
        problems.append(Problem(POOLS_VAR, "must be a list of pools"))
        return problems
    check_pool_list(problems, POOLS_VAR, gpu_pools, pool_where, also=check_plan_id)
    return problems
