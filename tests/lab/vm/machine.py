"""What one QEMU VM behind a lab BMC is, and the QEMU command line for one boot: pure functions, unit-tested.

Why pure: every decision the BMC makes (boot mode, the device this boot uses, the virtual CD's image) must end
up in QEMU's configuration exactly, and that mapping is tested without QEMU. ``lab.vm.host`` runs it.

The machine (QEMU 7.2's ``q35``, docs/system/i386/pc.rst in QEMU's source; one SATA controller, as an R730's
embedded one):

- ``disk0``: the one disk, SATA port 0, with the serial number and WWN the BMC's storage inventory names (the
  installer finds it by udev's ``ID_SERIAL_SHORT``/``ID_WWN``), a qcow2 file;
- ``vcd0``: the BMC's virtual CD, SATA port 1, empty until InsertMedia;
- ``pcd0``: the server's physical optical drive, SATA port 2, always empty (iDRAC8's ``Cd`` boots this one:
  the trap the lab's simulated hosts also model);
- ``nic0``: virtio-net with the BMC's boot NIC MAC on QEMU's user network (docs/system/devices/net.rst,
  "User Networking (SLIRP)"), no option ROM: the lab has no PXE server, so ``Pxe`` finds nothing to boot.

Boot order: each boot is a fresh QEMU process (a BMC boot is a POST; the firmware, SeaBIOS or OVMF, is chosen
by the BIOS ``BootMode`` and cannot change under a running VM), and the device the BMC picked for this boot is
the only one with a ``bootindex``, with ``-boot strict=on`` so the firmware does not fall through to another
device: what the BMC says boots, or nothing does (docs/system/bootindex.rst). The BMC's one-time override,
SCP one-time boot and persistent order (``lab.redfish.bmc``) therefore all reach the VM through that one
device.

Network: the user network's own addresses (10.0.2.0/24, gateway 10.0.2.2, DNS 10.0.2.3). Its DHCP server
starts at ``DHCP_START``, not at the inventory's ``GUEST_ADDRESS``, so a guest that took a DHCP lease is
somewhere else than the preseed said and the SSH forward (to ``GUEST_ADDRESS``) does not reach it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

QEMU = "qemu-system-x86_64"
QEMU_IMG = "qemu-img"
# Debian's ovmf package: the 4 MiB flash build without Secure Boot enforcement (shim and GRUB are signed and
# would pass, but a VM has no enrolled keys to check them with), and its empty variable store template.
OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")

# The user network (QEMU's defaults, written out so the inventory and the VM say the same).
NETWORK = "10.0.2.0/24"
GATEWAY = "10.0.2.2"
DNS = "10.0.2.3"
PREFIX = 24
GUEST_ADDRESS = "10.0.2.15"  # the inventory's static address for the VM
DHCP_START = "10.0.2.100"  # where QEMU's DHCP server leases from: never the inventory's address

# qdev ids of the devices a BMC boot can pick, by the BMC's boot device kind (lab.redfish.bmc).
DISK_ID, VIRTUAL_CD_ID, PHYSICAL_CD_ID, NIC_ID = "disk0", "vcd0", "pcd0", "nic0"
BOOT_DEVICE_IDS = {"Hdd": DISK_ID, "VirtualCD": VIRTUAL_CD_ID, "PhysicalCD": PHYSICAL_CD_ID, "Pxe": NIC_ID}
FIRMWARE_MODES = ("Bios", "Uefi")  # the BIOS attribute BootMode's values


@dataclass(frozen=True)
class VmSpec:
    """One VM: who it is (from its BMC and the lab's inventory) and how big."""

    name: str
    mac: str  # the BMC's boot NIC
    disk_serial: str
    disk_wwn: str  # 0x + 16 hex digits, as the BMC's storage inventory reports it
    ssh_port: int  # 127.0.0.1:ssh_port reaches GUEST_ADDRESS:22
    disk_gib: int = 16
    memory_mib: int = 1024  # the text installer's lowmem level 1 is 737 MiB (rootskel S15lowmem)
    cpus: int = 1  # the lane's machine has two shared cores


@dataclass(frozen=True)
class VmFiles:
    """Where one VM's files live (all inside its directory, all removed when the VM is stopped)."""

    directory: Path

    @property
    def disk(self) -> Path:
        return self.directory / "disk.qcow2"

    @property
    def uefi_vars(self) -> Path:
        return self.directory / "OVMF_VARS.fd"

    @property
    def qmp(self) -> Path:
        return self.directory / "qmp.sock"

    @property
    def serial(self) -> Path:
        return self.directory / "serial.log"

    @property
    def serial_socket(self) -> Path:
        return self.directory / "serial.sock"

    @property
    def pidfile(self) -> Path:
        return self.directory / "qemu.pid"

    @property
    def media_dir(self) -> Path:
        return self.directory / "media"


def boot_indexes(device: str) -> dict[str, int]:
    """``{qdev id: bootindex}`` for one boot: only the device the BMC picked, or nothing (no boot device)."""
    qdev = BOOT_DEVICE_IDS.get(device)
    return {qdev: 0} if qdev else {}


def _bootindex(indexes: dict[str, int], qdev: str) -> str:
    return f",bootindex={indexes[qdev]}" if qdev in indexes else ""


def qemu_argv(  # noqa: PLR0917 - one command line, every input named
    spec: VmSpec,
    files: VmFiles,
    mode: str,
    device: str,
    accel: str,
    cd_image: Path | None,
    qemu: str = QEMU,
) -> list[str]:
    """The command line of one boot: firmware by ``mode``, the BMC's ``device`` first and only, the CD's image."""
    if mode not in FIRMWARE_MODES:
        msg = f"boot mode must be one of {FIRMWARE_MODES}, not {mode!r}"
        raise ValueError(msg)
    if accel not in ("kvm", "tcg"):
        msg = f"accel must be kvm or tcg, not {accel!r}"
        raise ValueError(msg)
    indexes = boot_indexes(device)
    argv = [
        qemu,
        "-name",
        f"metal-vm-{spec.name},process=metal-vm-{spec.name}",
        "-machine",
        "q35",
        "-accel",
        accel,
        "-cpu",
        "qemu64" if accel == "tcg" else "host",  # TCG: the plainest x86-64 model is the quickest to emulate
        "-smp",
        str(spec.cpus),
        "-m",
        str(spec.memory_mib),
        "-nodefaults",
        "-no-user-config",
        "-vga",
        "std",
        "-display",
        "none",
        # A guest reboot ends the process (the BMC then runs a boot: POST, boot device, one-shots consumed);
        # a guest power-off ends it too (the BMC's power goes Off).
        "-no-reboot",
        "-boot",
        "strict=on",
        "-qmp",
        f"unix:{files.qmp},server=on,wait=off",
        # The serial port: everything it prints is appended to the log; the socket lets the lane type into it.
        "-chardev",
        f"socket,id=serial0,path={files.serial_socket},server=on,wait=off,logfile={files.serial},logappend=on",
        "-serial",
        "chardev:serial0",
        "-pidfile",
        str(files.pidfile),
        # A hardware RNG, as a server's CPU has (RDRAND): without one the installer starts haveged to
        # gather entropy, which under TCG costs minutes.
        "-device",
        "virtio-rng-pci,id=rng0",
    ]
    if mode == "Uefi":
        argv += [
            "-drive",
            f"if=pflash,format=raw,unit=0,readonly=on,file={OVMF_CODE}",
            "-drive",
            f"if=pflash,format=raw,unit=1,file={files.uefi_vars}",
        ]
    argv += [
        "-blockdev",
        f"driver=qcow2,node-name=disk0-fmt,file.driver=file,file.filename={files.disk}",
        "-device",
        f"ide-hd,id={DISK_ID},bus=ide.0,drive=disk0-fmt,serial={spec.disk_serial},wwn={spec.disk_wwn}"
        + _bootindex(indexes, DISK_ID),
    ]
    if cd_image is not None:
        argv += [
            "-blockdev",
            f"driver=raw,node-name=vcd0-fmt,read-only=on,file.driver=file,file.filename={cd_image}",
            "-device",
            f"ide-cd,id={VIRTUAL_CD_ID},bus=ide.1,drive=vcd0-fmt" + _bootindex(indexes, VIRTUAL_CD_ID),
        ]
    else:
        argv += ["-device", f"ide-cd,id={VIRTUAL_CD_ID},bus=ide.1" + _bootindex(indexes, VIRTUAL_CD_ID)]
    argv += [
        "-device",
        f"ide-cd,id={PHYSICAL_CD_ID},bus=ide.2" + _bootindex(indexes, PHYSICAL_CD_ID),
        "-netdev",
        f"user,id=net0,net={NETWORK},host={GATEWAY},dns={DNS},dhcpstart={DHCP_START},"
        f"hostfwd=tcp:127.0.0.1:{spec.ssh_port}-{GUEST_ADDRESS}:22",
        "-device",
        f"virtio-net-pci,id={NIC_ID},netdev=net0,mac={spec.mac},romfile=" + _bootindex(indexes, NIC_ID),
    ]
    return argv


def disk_create_argv(files: VmFiles, spec: VmSpec, qemu_img: str = QEMU_IMG) -> list[str]:
    """A sparse qcow2 disk (it grows with what the installer writes)."""
    return [qemu_img, "create", "-q", "-f", "qcow2", str(files.disk), f"{spec.disk_gib}G"]
