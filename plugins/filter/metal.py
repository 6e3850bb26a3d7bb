# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter that turns inventory groups ``pool_<name>`` into the host pools the metal modules take.

Why a filter: ``site.yml``'s metal preflight and the ``baremetal_host`` role pass the same pools to the modules,
and which inventory variable fills which key is a rule of the collection, kept once in Python
(``module_utils/_metal/pool.py``) rather than in two Jinja loops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool import pools_from_inventory


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar file metal_pools.yml.
        return {"metal_pools": _metal_pools}


def _metal_pools(pool_names: Any, groups: Mapping[str, Any], hostvars: Mapping[str, Any]) -> list[dict[str, Any]]:
    names = [pool_names] if isinstance(pool_names, str) else list(pool_names)
    wanted = {f"pool_{name}" for name in names}
    # Read only the pool hosts' variables: hostvars templates each host's variables when they are read.
    host_vars = {host: hostvars[host] for group in wanted for host in groups.get(group, ()) if host in hostvars}
    return pools_from_inventory(names, groups, host_vars)
