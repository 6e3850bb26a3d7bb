# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A filter that gives the ``modelplane_adopt`` role the inventory decisions of ``module_utils/_modelplane/plan.py``.

Why a filter: the role must run ``gpu_ready`` on the workload cluster for the classes that
``modelplane_cluster`` will generate, before that module runs; which classes those are (a pool's class
defaults to its name, given classes win) is the module's own rule, so the role asks the same code
instead of repeating it in Jinja.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.plan import inventory_plan


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar file modelplane_inventory_plan.yml.
        return {"modelplane_inventory_plan": _inventory_plan}


def _inventory_plan(
    node_pools: Any, classes: Any = None, gpu_inventory: Any = None, dry_run: Any = False, labelled: Any = False
) -> dict[str, Any]:
    try:
        return inventory_plan(node_pools, classes, gpu_inventory, dry_run=bool(dry_run), labelled=bool(labelled))
    except MetalplaneError as exc:
        raise AnsibleFilterError(f"modelplane_inventory_plan: {exc}") from exc
