# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that give roles the StorageClass decisions of ``module_utils/_kube/storage_class.py``.

Why filters: the ``longhorn_rwx`` role applies its class with ``kubernetes.core.k8s``; what it keeps
and what it reports are decisions, which belong in tested Python, not in the role's Jinja.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._kube.storage_class import (
    longhorn_replicas,
    storage_class_plan,
)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar files storage_class_plan.yml and longhorn_replicas.yml.
        return {"storage_class_plan": storage_class_plan, "longhorn_replicas": _replicas}


def _replicas(node_count: Any, override: Any = 0) -> int:
    """Jinja hands over strings and numbers alike (``"0"`` from a role default)."""
    return longhorn_replicas(int(node_count), int(override or 0))
