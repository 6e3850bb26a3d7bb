# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver options every NVIDIA module shares (paired with ``doc_fragments/nvidia.py``).

Why: the preflight (``gpu_driver_check``) and the driver installer decide on the same two facts, the
driver version and the kernel module flavour; one spec gives them one name, type and set of choices,
and a play sets them once for both (``module_defaults`` on the ``nvidia`` action group).
"""

from __future__ import annotations

from typing import Any

from .compat import MODULE_TYPES


def nvidia_argument_spec() -> dict[str, Any]:
    """Options common to the NVIDIA modules (documented in the ``nvidia`` doc fragment); a fresh dict."""
    return {
        "driver_version": {"type": "str", "required": True},
        "kernel_module_type": {"type": "str", "default": "auto", "choices": list(MODULE_TYPES)},
    }
