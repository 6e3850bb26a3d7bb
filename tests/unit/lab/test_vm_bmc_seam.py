"""The BMC side of the seam a VM plugs into: what ``BmcState`` tells a host that follows media and the button.

Why: the QEMU backend (``lab.vm.host``) gets InsertMedia/EjectMedia and the ACPI power button from the BMC
only through these calls; the simulated hosts (``lab.metal``), which have neither method, must see no change.
"""

from __future__ import annotations

from typing import Any

import pytest

from lab.redfish.bmc import BmcSpec, BmcState
from lab.redfish.tree import Tree


class _Vm:
    """A host with the VM's listener methods, recording the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def power_changed(self, state: str) -> None:
        self.calls.append(("power", state))

    def booted(self, boot: dict[str, Any]) -> None:
        self.calls.append(("boot", boot["device"], boot["cd_image"]))

    def media_changed(self, slot: str, image: str | None, media_types: tuple[str, ...]) -> None:
        self.calls.append(("media", slot, image, "CD" in media_types))

    def acpi_power_button(self) -> None:
        self.calls.append(("button",))


class _SimulatedHost:
    """A host without them (lab.metal's): power and boots only."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def power_changed(self, state: str) -> None:
        self.calls.append(("power", state))

    def booted(self, boot: dict[str, Any]) -> None:
        self.calls.append(("boot", boot["device"]))


IMAGE = "http://127.0.0.1:8080/r730.iso"
SLOT = {"idrac8": "CD", "idrac9": "1", "generic": "Cd"}


def _bmc(personality: str, host: Any, power: str = "Off") -> tuple[BmcState, Tree]:
    state = BmcState(BmcSpec(name="r730-vm", personality=personality, power_state=power), delay_scale=0.0)
    state.host = host
    return state, Tree(state)


@pytest.mark.parametrize("personality", ["idrac8", "idrac9", "generic"])
def test_insert_and_eject_reach_the_vm(personality: str) -> None:
    vm = _Vm()
    _state, tree = _bmc(personality, vm)
    slot = SLOT[personality]
    assert tree.finish_insert(slot, {"Image": IMAGE}, IMAGE, None).status == 204
    assert tree.eject(slot).status == 204
    assert tree.eject(slot).status == 204  # ejecting an empty slot tells the VM nothing
    assert [c for c in vm.calls if c[0] == "media"] == [("media", slot, IMAGE, True), ("media", slot, None, True)]


def test_a_manager_reset_ejects_from_the_vm() -> None:
    vm = _Vm()
    state, tree = _bmc("idrac8", vm)
    tree.finish_insert("CD", {"Image": IMAGE}, IMAGE, None)
    state.manager_reset()
    assert vm.calls[-1] == ("media", "CD", None, True)


def test_an_unreachable_image_reaches_nothing() -> None:
    vm = _Vm()
    _state, tree = _bmc("generic", vm)
    with pytest.raises(Exception, match="500"):
        tree.finish_insert("Cd", {"Image": IMAGE}, IMAGE, "connection refused")
    assert vm.calls == []


@pytest.mark.parametrize(
    ("host", "expected_power", "button"),
    [
        (_Vm(), "On", True),  # the VM's OS decides: the power stays on until it powers off
        (_SimulatedHost(), "Off", False),  # the BMC's own timeline, as before
    ],
    ids=["vm", "simulated"],
)
def test_graceful_shutdown_presses_a_vms_button(host: Any, expected_power: str, button: bool) -> None:
    state, _tree = _bmc("generic", host, power="On")
    assert state.reset_system("GracefulShutdown").status == 204
    assert state.power_state == expected_power
    assert (("button",) in host.calls) is button
    assert state.counters["acpi_power_button"] == int(button)


def test_the_vm_powering_off_is_the_bmcs_power() -> None:
    vm = _Vm()
    state, _tree = _bmc("generic", vm, power="On")
    state.reset_system("GracefulShutdown")
    state.host_power_off()  # what lab.vm.host does when the guest powers off
    assert state.power_state == "Off"
    assert ("power", "Off") in vm.calls


def test_the_cd_image_reaches_the_boot() -> None:
    vm = _Vm()
    state, tree = _bmc("generic", vm)
    tree.finish_insert("Cd", {"Image": IMAGE}, IMAGE, None)
    state.override_target, state.override_enabled = "Cd", "Once"
    state.reset_system("On")
    assert ("boot", "VirtualCD", IMAGE) in vm.calls
