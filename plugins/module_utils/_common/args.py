# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options that mean the same thing on every platform: whether to wait, and for how long.

Why: a wait's deadline has one name, one type and one unit across the collection, so a playbook
that sets it on ``vke_cluster`` sets it the same way on ``gpu_ready`` or ``bmc_reset``:
``wait_timeout``, an int, in seconds (as in amazon.aws and community.general modules, e.g.
``amazon.aws.ec2_instance``), with ``wait`` (bool) where waiting is optional. Only the default differs per
module (how long its platform's transition takes), so it is the argument of these functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InputError

# The option every wait reads its deadline from; also the ``field`` of its InputError.
WAIT_TIMEOUT = "wait_timeout"


def wait_timeout_spec(default: int) -> dict[str, Any]:
    """``wait_timeout`` alone, for modules that always wait (``kube_ready``, ``redfish_power``)."""
    return {WAIT_TIMEOUT: {"type": "int", "default": default}}


def wait_argument_spec(default_timeout: int) -> dict[str, Any]:
    """``wait`` (default true) and ``wait_timeout``, for modules where waiting is optional."""
    return {"wait": {"type": "bool", "default": True}, **wait_timeout_spec(default_timeout)}


def wait_timeout_seconds(params: Mapping[str, Any]) -> int:
    """The validated ``wait_timeout``: zero means look once and do not wait; negative is an input error."""
    seconds = int(params.get(WAIT_TIMEOUT) or 0)
    if seconds < 0:
        raise InputError(WAIT_TIMEOUT, f"must be zero or more seconds, got {seconds}")
    return seconds
