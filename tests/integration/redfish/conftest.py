"""Fixtures for the Redfish module tests: in-process RedfishLabs and an image server.

Every test file here starts its labs through ``start_redfish_lab`` (its own BMC specs and delay
scale) so that start and stop live in one place; ``redfish_lab`` is the common case, one BMC per
personality with instant transitions but for a short reset window.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import pytest
from integration.redfish.images import ImageServer

from lab.redfish.server import BmcSpec, RedfishLab

PERSONALITIES = ("idrac8", "idrac9", "generic")

StartLab = Callable[..., RedfishLab]


@pytest.fixture(scope="module")
def start_redfish_lab() -> Iterator[StartLab]:
    """``start(bmcs, delay_scale=0.0) -> RedfishLab``: started now, stopped when the module is done.

    Module scope, like the per-file lab fixtures it replaces: a lab lives until the last test of
    the module (on that xdist worker) finished. Labs are stopped in reverse order, each even when
    stopping another one failed.
    """
    with contextlib.ExitStack() as stack:

        def start(bmcs: Sequence[BmcSpec], delay_scale: float = 0.0) -> RedfishLab:
            return stack.enter_context(RedfishLab(bmcs=list(bmcs), delay_scale=delay_scale))

        yield start


# Instant transitions except a Manager reset, which takes a short real window (seconds at delay
# scale 1: dropped, busy, 401, then up). With no window at all the BMC never looks down after a
# reset, and every reset (bmc_reset, the ladder's last rung) waits the module's full 45 s
# "went down" timeout (session.DOWN_TIMEOUT) before it polls for readiness.
INSTANT_BUT_RESET = {
    "power_delay": 0.0,
    "lc_delay": 0.0,
    "task_delay": 0.0,
    "reset_down": 0.6,
    "reset_busy": 0.2,
    "reset_unauth": 0.3,
}


@pytest.fixture(scope="module")
def redfish_lab(start_redfish_lab: StartLab) -> RedfishLab:
    """One BMC per personality (``<personality>-1``), powered off; see ``INSTANT_BUT_RESET``."""
    bmcs = [BmcSpec(name=f"{p}-1", personality=p, power_state="Off", **INSTANT_BUT_RESET) for p in PERSONALITIES]
    return start_redfish_lab(bmcs, delay_scale=1.0)


@pytest.fixture(scope="module")
def images() -> Iterator[ImageServer]:
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()
