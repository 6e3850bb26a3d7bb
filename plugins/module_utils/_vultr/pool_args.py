# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument spec of a node pool, shared by ``vke_node_pool`` and ``vke_cluster``'s ``node_pools``.

Why: one definition of the pool options (named after the API fields) so both modules validate the
same way; semantic checks (min <= max, autoscaler) live in ``node_pool.pool_spec_from_params``.
"""

from __future__ import annotations

from typing import Any

from .cluster import SYSTEM_POOL_DEFAULTS
from .node_pool import OWNER_TAG, TAINT_EFFECTS


def taint_spec() -> dict[str, Any]:
    return {
        "key": {"type": "str", "required": True, "no_log": False},
        "value": {"type": "str", "default": ""},
        "effect": {"type": "str", "choices": list(TAINT_EFFECTS), "default": "NoSchedule"},
    }


def pool_spec() -> dict[str, Any]:
    """Options of one pool (``vke_node_pool`` adds cluster, state, replace, force, id)."""
    return {
        "label": {"type": "str", "required": True},
        "plan": {"type": "str"},
        "node_quantity": {"type": "int"},
        "auto_scaler": {"type": "bool"},
        "min_nodes": {"type": "int"},
        "max_nodes": {"type": "int"},
        "labels": {"type": "dict"},
        "taints": {"type": "list", "elements": "dict", "options": taint_spec()},
        "tag": {"type": "str", "default": OWNER_TAG},
        "vpc_only": {"type": "bool"},
    }


def pool_item_spec() -> dict[str, Any]:
    """An item of ``vke_cluster``'s ``node_pools``."""
    return {
        **pool_spec(),
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "replace": {"type": "bool", "default": False},
        "gpu_count": {"type": "int"},
    }


def system_pool_spec() -> dict[str, Any]:
    """Options of ``vke_cluster``'s ``system_pool``: the defaults are ``SYSTEM_POOL_DEFAULTS``, never retyped."""
    spec: dict[str, Any] = {
        name: {"type": "int" if isinstance(value, int) else "str", "default": value}
        for name, value in SYSTEM_POOL_DEFAULTS.items()
    }
    return {
        **spec,
        "labels": {"type": "dict"},
        "taints": {"type": "list", "elements": "dict", "options": taint_spec()},
    }
