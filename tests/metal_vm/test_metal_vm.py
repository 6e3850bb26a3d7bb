"""The short VM lane (``make test-metal-vm``): the iDRAC8 path boots boot_iso's Debian ISO in a real VM.

For BIOS (SeaBIOS, ISOLINUX) and UEFI (OVMF, shim, GRUB through the efi.img stub): the modules build and mount
the ISO, set Dell's one-time virtual-CD boot and power on; the VM boots the CD; the loader starts the edited
entry with no menu (the kernel's command line carries ``auto=true priority=critical``); debian-installer asks
no question, takes the preseed and configures the static network the preseed names (its own log: netcfg's
answers; and the user network: its connections to the Debian mirror come from that address, while the
network's DHCP server would have leased another); then the modules eject, find the boot order with the disk
first unchanged by the one-time boot, and power off; the VM's process and every file are gone.

A broken preseed fails the lane naming what is wrong: a gateway the network does not have (the gateway the
installer used, from its own log), a boot MAC no NIC of the VM has (both MACs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lab.vm.host import wait_until
from lab.vm.machine import DNS, GATEWAY, GUEST_ADDRESS
from metal_vm.lane import BMC_NAME, LANE_TEST_TIMEOUT, VM_START_TIMEOUT, LaneFailure, Network, VmLane, lane_processes

# pytest-timeout's 300 s default (pyproject.toml) is far below a boot under TCG.
pytestmark = pytest.mark.timeout(LANE_TEST_TIMEOUT)


def _provisioned(lane: VmLane, network: Network | None = None) -> None:
    run = lane.playbook("provision.yml", lane.extra_vars(network))
    iso = run.task("Installer ISO for the host (served to the BMC)")
    firmware = {(p["firmware"], p["loader"]) for p in iso["boot_paths"]}
    assert {("bios", "isolinux"), ("uefi", "grub")} <= firmware
    assert run.task("Boot the virtual CD once (iDRAC8, Dell SCP)")["changed"]
    # The VM starts once the BMC's power-on completes and the CD's image is copied (the host's worker).
    assert wait_until(lambda: bool(lane.vm.log.boots or lane.vm.log.errors), VM_START_TIMEOUT)
    boots = lane.vm.log.boots
    assert boots, f"the BMC powered on but no VM started: {lane.vm.log.errors}"
    assert (boots[-1]["mode"], boots[-1]["device"], boots[-1]["via"]) == (lane.mode, "VirtualCD", "scp")
    assert boots[-1]["cd_image"], "the VM booted without the inserted image in its CD drive"


def _torn_down(lane: VmLane) -> None:
    pid = lane.vm.pid
    run = lane.playbook("teardown.yml", lane.extra_vars())
    assert run.task("Eject the virtual media")["changed"]
    # The one-time boot left the persistent order alone: restoring it changes nothing.
    assert not run.task("Disk first in the persistent boot order")["changed"]
    assert run.task("Power off")["changed"]
    assert run.task("Stop serving and delete the ISO")["changed"]
    state = lane.lab.bmc(BMC_NAME).snapshot()
    assert state["power_state"] == "Off"
    assert state["boot"]["enabled"] == "Disabled"
    assert state["boot"]["scp_boot"] == {}  # the one-time boot was consumed by the boot
    assert not any(slot["inserted"] for slot in state["virtual_media"].values())
    assert not lane.vm.running
    assert not Path(lane.iso_dest).exists()
    assert not lane.vm.log.errors
    lane.stop()
    assert not lane_processes(pid), f"QEMU {pid} is still running"
    assert not lane.vm.files.directory.exists(), "the VM's disk, media or sockets were left behind"


@pytest.mark.parametrize("mode", ["Bios", "Uefi"])
def test_installer_starts_unattended_with_the_static_network(vm_lane: Callable[[str, str], VmLane], mode: str) -> None:
    lane = vm_lane(mode, f"short-{mode.lower()}")
    _provisioned(lane)
    lane.wait_for_installer_log()
    args = lane.text()
    command_line = next(line for line in args.splitlines()[::-1] if "Kernel command line:" in line)
    assert "auto=true" in command_line, command_line
    assert "priority=critical" in command_line, command_line
    if mode == "Bios":
        assert "/preseed.img" in command_line  # ISOLINUX names every initrd on the command line

    verdict = lane.wait_for_network(Network(mac=lane.vm.spec.mac))
    used = verdict["network_used"]
    assert used["autoconfig_disabled"] == "true"
    assert (used["address"], used["gateway"], used["nameservers"]) == (GUEST_ADDRESS, GATEWAY, DNS)
    assert used["interface"], "the preseed's early command did not name the NIC with the boot MAC"
    assert verdict["questions_shown"] == []
    assert verdict["dhcp_log"] == []
    assert all(c.startswith(f"{GUEST_ADDRESS}:") for c in verdict["mirror_connections"])
    lane.timings.write({"accel": lane.accel, "mode": mode, "verdict": verdict})
    _torn_down(lane)
    lane.timings.mark("torn down")
    lane.timings.write({"accel": lane.accel, "mode": mode, "verdict": verdict})


def test_a_wrong_gateway_fails_naming_it(vm_lane: Callable[[str, str], VmLane]) -> None:
    lane = vm_lane("Bios", "short-wrong-gateway")
    wrong = "10.0.2.1"  # on the subnet, but nothing answers there
    _provisioned(lane, Network(mac=lane.vm.spec.mac, gateway=wrong))
    lane.wait_for_installer_log()
    with pytest.raises(LaneFailure) as failure:
        lane.wait_for_network(Network(mac=lane.vm.spec.mac, gateway=wrong))
    message = str(failure.value)
    assert f"the installer used gateway {wrong}, the VM's network needs {GATEWAY}" in message, message
    assert lane.verdict["network_used"]["gateway"] == wrong  # from the installer's own log
    lane.timings.write({"accel": lane.accel, "mode": "Bios", "failure": message})
    _torn_down(lane)


def test_a_wrong_mac_fails_naming_it(vm_lane: Callable[[str, str], VmLane]) -> None:
    lane = vm_lane("Bios", "short-wrong-mac")
    wrong = "52:54:00:0f:0f:0f"  # no NIC of the VM has it: the preseed's early command finds none
    assert wrong != lane.vm.spec.mac.lower()
    _provisioned(lane, Network(mac=wrong))

    def installer_configures_its_network() -> None:
        # The failed early command's dialog may come before GNU screen (and its log window) starts.
        lane.wait_for_installer_log()
        lane.wait_for_network(Network(mac=wrong))

    with pytest.raises(LaneFailure) as failure:
        installer_configures_its_network()
    message = str(failure.value)
    assert f"MAC {wrong}; the VM's boot NIC is {lane.vm.spec.mac.lower()}" in message, message
    lane.timings.write({"accel": lane.accel, "mode": "Bios", "failure": message})
    _torn_down(lane)
