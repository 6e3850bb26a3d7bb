"""What differs between the emulated BMC generations: ids, models, allowed values, features.

Why: the modules pick their code path from ``Manager.Model`` and feature probes (as openstack/ironic's
``drac/boot.py::_get_idrac_version_from_model`` does), so each personality must differ exactly where real
iDRAC8 (13G), iDRAC9 (14G+) and a plain DMTF BMC differ, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Personality:
    name: str
    system_id: str
    manager_id: str
    chassis_id: str
    manufacturer: str
    model: str
    manager_model: str
    firmware: str
    bios_version: str
    redfish_version: str
    base_version: str  # Base message registry version in MessageIds ("Base.<v>.InternalError")
    dell_prefix: str  # prefix of Dell MessageIds ("IDRAC.2.8."), "" when not a Dell
    reset_types: tuple[str, ...]
    manager_reset_types: tuple[str, ...]
    boot_targets: tuple[str, ...]
    vm_location: str  # "manager", "system" or "both"
    vm_slots: tuple[tuple[str, tuple[str, ...]], ...]  # (slot id, MediaTypes)
    etags: bool  # ETag on GET, If-Match checked on PATCH
    boot_order: bool  # Boot.BootOrder + BootOptions
    boot_order_pending: bool  # BootOrder PATCH applied at the next boot (by a BIOS job)
    boot_sources: bool  # Dell BootSources + BootSources/Settings
    dell: bool  # Dell OEM: Jobs, SCP actions, Dell MessageIds
    dell_services: bool  # DelliDRACCardService, DellJobService, DellLCService (14G+)
    mode_writable: bool  # BootSourceOverrideMode can be PATCHed (13G: read-only)
    mode_queues_job: bool  # every BootSourceOverrideMode in a PATCH queues a BIOS job (Dell 14G+)
    bios_apply_times: tuple[str, ...]  # @Redfish.SettingsApplyTime values; () = needs an explicit job
    max_sessions: int
    pcie_under_chassis: bool
    only_member_query: bool  # DSP0266 ``?only`` on collections, advertised in ProtocolFeaturesSupported
    default_boot_mode: str  # BIOS BootMode: "Uefi" or "Bios"


DELL_TARGETS_13G = ("None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup", "Utilities", "UefiTarget", "SDCard")

PERSONALITIES: dict[str, Personality] = {
    "idrac8": Personality(
        name="idrac8",
        system_id="System.Embedded.1",
        manager_id="iDRAC.Embedded.1",
        chassis_id="System.Embedded.1",
        manufacturer="Dell Inc.",
        model="PowerEdge R730",
        manager_model="13G Monolithic",
        firmware="2.84.84.84",
        bios_version="2.19.0",
        redfish_version="1.4.0",
        base_version="1.2",
        dell_prefix="IDRAC.1.6.",
        # The reference: iDRAC8 may lack ForceRestart and GracefulShutdown.
        reset_types=("On", "ForceOff", "GracefulRestart", "PushPowerButton", "Nmi"),
        manager_reset_types=("GracefulRestart",),
        boot_targets=DELL_TARGETS_13G,
        vm_location="manager",
        vm_slots=(("CD", ("CD", "DVD")), ("RemovableDisk", ("USBStick",))),
        etags=False,
        boot_order=False,
        boot_order_pending=True,
        boot_sources=True,
        dell=True,
        dell_services=False,
        mode_writable=False,
        mode_queues_job=False,
        bios_apply_times=(),
        max_sessions=4,
        pcie_under_chassis=False,
        only_member_query=False,
        default_boot_mode="Bios",
    ),
    "idrac9": Personality(
        name="idrac9",
        system_id="System.Embedded.1",
        manager_id="iDRAC.Embedded.1",
        chassis_id="System.Embedded.1",
        manufacturer="Dell Inc.",
        model="PowerEdge R740",
        manager_model="14G Monolithic",
        firmware="6.10.30.00",
        bios_version="2.19.1",
        redfish_version="1.17.0",
        base_version="1.12",
        dell_prefix="IDRAC.2.8.",
        reset_types=(
            "On",
            "ForceOff",
            "ForceRestart",
            "GracefulRestart",
            "GracefulShutdown",
            "PushPowerButton",
            "Nmi",
            "PowerCycle",
        ),
        manager_reset_types=("GracefulRestart",),
        boot_targets=(*DELL_TARGETS_13G, "UefiHttp"),
        vm_location="both",
        vm_slots=(("1", ("CD", "DVD")), ("2", ("USBStick",))),
        etags=True,
        boot_order=True,
        boot_order_pending=True,
        boot_sources=True,
        dell=True,
        dell_services=True,
        mode_writable=True,
        mode_queues_job=True,
        bios_apply_times=("Immediate", "OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"),
        max_sessions=8,
        pcie_under_chassis=True,
        only_member_query=False,
        default_boot_mode="Uefi",
    ),
    "generic": Personality(
        name="generic",
        system_id="1",
        manager_id="1",
        chassis_id="1",
        manufacturer="Contoso",
        model="GPU Server 3000",
        manager_model="Contoso BMC 2",
        firmware="1.2.3",
        bios_version="P1.20",
        redfish_version="1.15.0",
        base_version="1.16",
        dell_prefix="",
        reset_types=(
            "On",
            "ForceOff",
            "GracefulShutdown",
            "GracefulRestart",
            "ForceRestart",
            "Nmi",
            "ForceOn",
            "PushPowerButton",
            "PowerCycle",
        ),
        manager_reset_types=("GracefulRestart", "ForceRestart"),
        boot_targets=("None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup", "UefiTarget", "UefiHttp"),
        vm_location="system",
        vm_slots=(("Cd", ("CD", "DVD")), ("Usb", ("USBStick",))),
        etags=True,
        boot_order=True,
        boot_order_pending=False,
        boot_sources=False,
        dell=False,
        dell_services=False,
        mode_writable=True,
        mode_queues_job=False,
        bios_apply_times=("Immediate", "OnReset"),
        max_sessions=16,
        pcie_under_chassis=True,
        only_member_query=True,
        default_boot_mode="Uefi",
    ),
}


# The BMCs ``python tests/lab/redfish/server.py`` serves when ``--bmcs`` is not given: name -> personality.
DEFAULT_BMCS: dict[str, str] = {"r730-1": "idrac8", "r740-1": "idrac9", "gen-1": "generic"}
LAB_USERNAME = "root"
LAB_PASSWORD = "calvin"  # the well-known lab credential; the lab is loopback only


def lab_endpoint(host: str, port: int, state_dir: Path) -> dict[str, Any]:
    """The ``endpoints.yml`` entry of the default Redfish lab (see ``lab.common.registry``)."""
    return {
        "ca_path": str(state_dir / "ca.pem"),
        "username": LAB_USERNAME,
        "password": LAB_PASSWORD,
        "bmcs": {
            name: {"bmc_url": f"https://{host}:{port}/bmc/{name}", "personality": personality}
            for name, personality in DEFAULT_BMCS.items()
        },
    }
