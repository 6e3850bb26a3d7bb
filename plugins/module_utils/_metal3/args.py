# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of ``metal3_host``: the host pool's (``_metal/pool_args.py``) plus what provisions through Metal3.

Why the pool's options: a pool is the same inventory group whichever provisioner installs it, so a cluster switches
provisioner by one variable. ``namespace`` keeps its name and changes its default: with Metal3 the claim lives on
the BareMetalHost, in the namespace of the hosts (``metal3``), not in the control plane's Lease namespace.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.args import wait_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._metal.pool_args import metal_pool_argument_spec

from . import bmh as b
from . import progress as p
from .run import DEFAULT_NAMESPACE, DEFAULT_WAIT_TIMEOUT


def metal3_pool_argument_spec() -> dict[str, Any]:
    """The pool's options with the BareMetalHosts' namespace, the cluster and the selector (both modules)."""
    spec = metal_pool_argument_spec()
    spec["namespace"] = {"type": "str", "default": DEFAULT_NAMESPACE}
    spec["cluster"] = {"type": "str", "required": True}
    spec["host_selector"] = {"type": "dict"}
    return spec


def metal3_host_argument_spec() -> dict[str, Any]:
    """A fresh dict of ``metal3_host``'s options (documented in the module)."""
    spec = metal3_pool_argument_spec()
    spec.update(
        {
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "image": {
                "type": "dict",
                "options": {
                    "url": {"type": "str", "aliases": ["imageURL"]},
                    "checksum": {"type": "str", "aliases": ["imageChecksum"]},
                    "checksum_type": {
                        "type": "str",
                        "choices": list(b.CHECKSUM_TYPES),
                        "aliases": ["imageChecksumType"],
                    },
                    "disk_format": {"type": "str", "choices": list(b.DISK_FORMATS), "aliases": ["imageDiskFormat"]},
                },
            },
            "network": {
                "type": "dict",
                "options": {
                    "node_ip": {"type": "str"},
                    "gateway": {"type": "str"},
                    "dns": {"type": "list", "elements": "str"},
                },
            },
            "hostname": {"type": "str"},
            "ssh_user": {"type": "str", "default": "root"},
            "ssh_authorized_key": {"type": "str", "no_log": False},  # a public key
            "boot_mode": {"type": "str", "choices": list(b.BOOT_MODES), "default": "UEFI"},
            "automated_cleaning_mode": {"type": "str", "choices": list(b.CLEANING_MODES), "default": "metadata"},
            "inspection_mode": {"type": "str", "choices": list(b.INSPECTION_MODES)},
            "disable_certificate_verification": {"type": "bool", "default": False},
            "claimer": {"type": "str"},
            **wait_argument_spec(DEFAULT_WAIT_TIMEOUT),
            "state_timeouts": {"type": "dict"},
            "delete_host": {"type": "bool", "default": False},
            "after_recovery": {"type": "str", "choices": [p.RECOVER_BOOT_ORDER, p.RECOVER_BMC_RESET]},
        }
    )
    return spec
