# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over Kubernetes task results (``module_utils/_kube/busy.py``).

Why a filter: the roles retry their kubernetes.core tasks with ``until`` only while the API server answers "busy";
the decision is tested Python, not Jinja.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._kube.busy import kube_busy


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar file kube_busy.yml.
        return {"kube_busy": kube_busy}
