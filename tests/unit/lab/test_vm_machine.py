"""The QEMU backend's pure parts: the QMP messages BMC actions become, and one boot's QEMU command line.

Why: the VM lane itself is opt-in (QEMU, minutes); what each BMC decision turns into is checked here, fast,
without QEMU: the firmware per BIOS BootMode, the BMC's boot device as the only bootable one, the virtual CD's
image, the NIC's MAC, the disk's identity and the user network's addresses.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lab.vm import qmp
from lab.vm.machine import (
    DHCP_START,
    GUEST_ADDRESS,
    OVMF_CODE,
    VmFiles,
    VmSpec,
    boot_indexes,
    disk_create_argv,
    qemu_argv,
)

SPEC = VmSpec(
    name="r730-vm", mac="f8:bc:12:aa:bb:cc", disk_serial="WFKB7388", disk_wwn="0x5000c500d5cdd26b", ssh_port=40022
)
FILES = VmFiles(Path("/lab/vm/r730-vm"))


def _devices(argv: list[str]) -> dict[str, str]:
    """``{qdev id: -device value}`` of a command line."""
    devices = {}
    for flag, value in itertools.pairwise(argv):
        if flag == "-device":
            fields = dict(part.split("=", 1) for part in value.split(",")[1:] if "=" in part)
            devices[fields["id"]] = value
    return devices


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            qmp.change_medium("vcd0", Path("/lab/vm/media/CD.iso")),
            {
                "execute": "blockdev-change-medium",
                "arguments": {
                    "id": "vcd0",
                    "filename": "/lab/vm/media/CD.iso",
                    "format": "raw",
                    "read-only-mode": "read-only",
                },
            },
        ),
        (qmp.eject("vcd0"), {"execute": "eject", "arguments": {"id": "vcd0", "force": True}}),
        (qmp.power_button(), {"execute": "system_powerdown"}),
        (qmp.power_cut(), {"execute": "quit"}),
        (qmp.query_status(), {"execute": "query-status"}),
        (qmp.query_block(), {"execute": "query-block"}),
        (
            qmp.monitor("info usernet"),
            {"execute": "human-monitor-command", "arguments": {"command-line": "info usernet"}},
        ),
    ],
    ids=["insert", "eject", "button", "cut", "status", "block", "monitor"],
)
def test_qmp_messages(message: dict[str, object], expected: dict[str, object]) -> None:
    assert message == expected


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("VirtualCD", {"vcd0": 0}),
        ("Hdd", {"disk0": 0}),
        ("PhysicalCD", {"pcd0": 0}),  # iDRAC8's Cd: the empty physical drive
        ("Pxe", {"nic0": 0}),  # no option ROM: nothing boots
        ("None", {}),
        ("BiosSetup", {}),
    ],
)
def test_boot_indexes_only_the_bmc_device(device: str, expected: dict[str, int]) -> None:
    assert boot_indexes(device) == expected


@pytest.mark.parametrize(
    ("device", "bootable"),
    [("VirtualCD", "vcd0"), ("Hdd", "disk0"), ("PhysicalCD", "pcd0"), ("Pxe", "nic0"), ("None", None)],
)
def test_command_line_boots_what_the_bmc_picked(device: str, bootable: str | None) -> None:
    argv = qemu_argv(SPEC, FILES, "Bios", device, "tcg", Path("/lab/vm/media/CD.iso"))
    devices = _devices(argv)
    with_index = sorted(qdev for qdev, value in devices.items() if "bootindex=" in value)
    assert with_index == ([bootable] if bootable else [])
    if bootable:
        assert devices[bootable].endswith(",bootindex=0")
    assert argv[argv.index("-boot") + 1] == "strict=on"  # the firmware must not fall through


@pytest.mark.parametrize(
    ("mode", "pflash"),
    [("Bios", False), ("Uefi", True)],
)
def test_firmware_follows_boot_mode(mode: str, pflash: bool) -> None:
    argv = qemu_argv(SPEC, FILES, mode, "VirtualCD", "tcg", None)
    drives = [argv[i + 1] for i, flag in enumerate(argv) if flag == "-drive"]
    if pflash:
        assert drives == [
            f"if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}",
            f"if=pflash,format=raw,unit=1,file={FILES.uefi_vars}",
        ]
    else:
        assert drives == []  # SeaBIOS, QEMU's default firmware


@pytest.mark.parametrize(
    ("cd_image", "has_medium"),
    [(Path("/lab/vm/media/CD.iso"), True), (None, False)],
)
def test_virtual_cd_holds_the_inserted_image(cd_image: Path | None, has_medium: bool) -> None:
    argv = qemu_argv(SPEC, FILES, "Bios", "VirtualCD", "tcg", cd_image)
    cd = _devices(argv)["vcd0"]
    blockdevs = [argv[i + 1] for i, flag in enumerate(argv) if flag == "-blockdev"]
    if has_medium:
        assert "drive=vcd0-fmt" in cd
        assert f"driver=raw,node-name=vcd0-fmt,read-only=on,file.driver=file,file.filename={cd_image}" in blockdevs
    else:
        assert "drive=" not in cd  # an empty tray: InsertMedia fills it over QMP
        assert not any("vcd0" in b for b in blockdevs)
    assert "drive=" not in _devices(argv)["pcd0"]  # the physical drive is always empty


def test_identity_and_network() -> None:
    argv = qemu_argv(SPEC, FILES, "Uefi", "Hdd", "kvm", None)
    devices = _devices(argv)
    assert "mac=f8:bc:12:aa:bb:cc" in devices["nic0"]
    assert "romfile=" in devices["nic0"].split(",")  # no iPXE: the lab has no PXE server
    assert "serial=WFKB7388" in devices["disk0"]
    assert "wwn=0x5000c500d5cdd26b" in devices["disk0"]
    netdev = argv[argv.index("-netdev") + 1]
    assert f"dhcpstart={DHCP_START}" in netdev
    assert DHCP_START != GUEST_ADDRESS  # a DHCP lease never lands on the inventory's address
    assert f"hostfwd=tcp:127.0.0.1:40022-{GUEST_ADDRESS}:22" in netdev  # loopback only
    assert argv[argv.index("-accel") + 1] == "kvm"
    assert "-no-reboot" in argv  # a guest reboot goes back through the BMC
    assert devices["rng0"].startswith("virtio-rng-pci")  # the installer needs no haveged
    assert argv[argv.index("-qmp") + 1] == f"unix:{FILES.qmp},server=on,wait=off"


@pytest.mark.parametrize(
    ("mode", "accel", "error"),
    [("Legacy", "tcg", "boot mode"), ("Bios", "hvf", "accel")],
)
def test_bad_inputs_refused(mode: str, accel: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        qemu_argv(SPEC, FILES, mode, "Hdd", accel, None)


def test_disk_is_created_sparse_qcow2() -> None:
    assert disk_create_argv(FILES, SPEC) == ["qemu-img", "create", "-q", "-f", "qcow2", str(FILES.disk), "16G"]
