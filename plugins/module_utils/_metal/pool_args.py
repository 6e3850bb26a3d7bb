# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options ``host_claim`` and ``host_pool_info`` share (paired with ``doc_fragments/metal_pool.py``).

Why one spec: both modules read the same pool (the BMC hosts of inventory group ``pool_<name>``), the same
requirements and the same Leases, so a play sets them once (``module_defaults`` on the ``metal`` action
group). The control-plane connection is Modelplane's (``_modelplane/args.py``), never ``K8S_AUTH_*``: a
claim must land on the control plane every controller shares, not in a workload cluster.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.args import modelplane_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.args import DEFAULT_API_TIMEOUT

from .claims import DEFAULT_NAMESPACE

HOST_OPTIONS: dict[str, dict[str, Any]] = {
    "name": {"type": "str", "required": True},
    "bmc_url": {"type": "str", "required": True},
    "username": {"type": "str", "required": True},
    "password": {"type": "str", "required": True, "no_log": True},
    "personality": {"type": "str"},
    "boot_mac": {"type": "str", "required": True},
    "validate_certs": {"type": "bool", "default": True},
    "ca_cert": {"type": "path"},
    "facts": {"type": "dict"},
    "root_disk": {"type": "dict", "options": {"wwn": {"type": "str"}, "serial": {"type": "str"}}},
    "system_path": {"type": "str"},
}

REQUIREMENT_OPTIONS: dict[str, dict[str, Any]] = {
    "gpu_model": {"type": "str"},
    "gpu_count": {"type": "int"},
    "min_memory_gib": {"type": "int"},
}


def _copy(option: dict[str, Any]) -> dict[str, Any]:
    """A deep enough copy of one option (its sub-options too), so a caller never shares a dict with another spec."""
    copied = dict(option)
    if "options" in copied:
        copied["options"] = {name: _copy(sub) for name, sub in copied["options"].items()}
    return copied


def metal_pool_argument_spec() -> dict[str, Any]:
    """A fresh dict of the shared options (the control-plane connection, the pool, its hosts, requirements)."""
    return {
        **modelplane_argument_spec(),
        "pool": {"type": "str", "required": True},
        "hosts": {
            "type": "list",
            "elements": "dict",
            "required": True,
            "options": {name: _copy(option) for name, option in HOST_OPTIONS.items()},
        },
        "requirements": {
            "type": "dict",
            "options": {name: dict(option) for name, option in REQUIREMENT_OPTIONS.items()},
        },
        "namespace": {"type": "str", "default": DEFAULT_NAMESPACE},
        "api_timeout": {"type": "int", "default": DEFAULT_API_TIMEOUT},
        "refused_login_retries": {"type": "int", "default": 0},
    }
