"""Small installer ISOs that follow the distributions' conventions, for the lab's own tests.

Why: the host simulation must be tested against ISOs shaped like real ones (El Torito catalog with
a BIOS and a UEFI entry, ISOLINUX/GRUB configurations, a kickstart on the ISO, a NoCloud seed, a
preseed in a cpio appended to the initrd) without depending on the collection's ``boot_iso``
builder, which is developed separately. The kernel, initrd base and EFI system partition are
stand-ins: a few bytes each, enough for the reader to follow the boot path (the EFI image carries
the ``BOOTX64 EFI`` 8.3 directory entry name that UEFI firmware looks for).

    build_iso(path, kickstart_files(KickstartSpec(...)))
"""

from __future__ import annotations

import gzip
import io
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pycdlib
import yaml

DEFAULT_VOLUME_ID = "METALPLANE-LAB"
KERNEL_STAND_IN = b"\x7fKERNEL stand-in for the lab reader\n"
INITRD_BASE_FILES = {"init": b"#!/bin/sh\n"}


# --------------------------------------------------------------------------------- builders
def make_cpio(files: dict[str, bytes]) -> bytes:
    """A cpio ``newc`` archive of regular files (the kernel's initramfs format)."""
    out = io.BytesIO()
    inode = 1
    for name, data in [*files.items(), ("TRAILER!!!", b"")]:
        encoded = name.encode() + b"\x00"
        mode = 0o100644 if name != "TRAILER!!!" else 0
        fields = [inode, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0]
        header = b"070701" + b"".join(f"{v:08X}".encode() for v in fields)
        out.write(header + encoded)
        out.write(b"\x00" * (-out.tell() % 4))
        out.write(data)
        out.write(b"\x00" * (-out.tell() % 4))
        inode += 1
    return out.getvalue()


def fake_efi_image() -> bytes:
    """A stand-in EFI system partition image: a boot sector and the BOOTX64.EFI directory entry name."""
    image = bytearray(4096)
    image[3:11] = b"MSWIN4.1"
    image[510:512] = b"\x55\xaa"
    image[1024 : 1024 + 11] = b"BOOTX64 EFI"
    return bytes(image)


def build_iso(
    path: Path,
    files: dict[str, bytes],
    *,
    bios_boot: str | None = "/isolinux/isolinux.bin",
    efi_boot: str | None = "/images/efiboot.img",
    volume_id: str = DEFAULT_VOLUME_ID,
) -> Path:
    """Write an ISO with Rock Ridge names, holding ``files`` and El Torito entries for BIOS and/or UEFI."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=4, rock_ridge="1.09", vol_ident=volume_id)
    all_files = dict(files)
    if bios_boot is not None:
        all_files.setdefault(bios_boot, b"ISOLINUX stand-in")
    if efi_boot is not None:
        all_files.setdefault(efi_boot, fake_efi_image())
    made_dirs: dict[str, str] = {"": ""}
    iso_paths: dict[str, str] = {}
    for n, (name, data) in enumerate(sorted(all_files.items())):
        parts = name.strip("/").split("/")
        parent_iso = ""
        for depth in range(len(parts) - 1):
            rr_dir = "/".join(parts[: depth + 1])
            if rr_dir not in made_dirs:
                iso_dir = f"{parent_iso}/D{len(made_dirs)}"
                iso.add_directory(iso_dir, rr_name=parts[depth])
                made_dirs[rr_dir] = iso_dir
            parent_iso = made_dirs[rr_dir]
        iso_path = f"{parent_iso}/F{n}.;1"
        iso.add_fp(io.BytesIO(data), len(data), iso_path, rr_name=parts[-1])
        iso_paths[name] = iso_path
    if bios_boot is not None:
        iso.add_eltorito(iso_paths[bios_boot], bootcatfile="/BOOTCAT.;1", rr_bootcatname="boot.cat", boot_load_size=4)
    if efi_boot is not None:
        # The first entry's platform is the validation entry's: 0xEF on a UEFI-only ISO.
        kwargs = {} if bios_boot is not None else {"bootcatfile": "/BOOTCAT.;1", "rr_bootcatname": "boot.cat"}
        iso.add_eltorito(iso_paths[efi_boot], efi=True, platform_id=0xEF, **kwargs)
    iso.write(str(path))
    iso.close()
    return path


def isolinux_cfg(kernel: str, append: str, *, timeout: int = 1, prompt: int = 0, label: str = "install") -> str:
    return textwrap.dedent(
        f"""\
        default {label}
        prompt {prompt}
        timeout {timeout}
        label {label}
          kernel {kernel}
          append {append}
        """
    )


def grub_cfg(kernel: str, args: str, initrd: str, *, timeout: int | None = 1, title: str = "Install") -> str:
    lines = [] if timeout is None else [f"set timeout={timeout}"]
    lines += ["set default=0", f"menuentry '{title}' {{", f"  linux {kernel} {args}", f"  initrd {initrd}", "}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- configurations
@dataclass
class HostSpec:
    """What a configuration says about the host: its NIC, address, keys and disk."""

    mac: str
    address: str
    prefix: int = 24
    gateway: str | None = None
    hostname: str = "node1"
    authorized_key: str | None = None
    host_key: str | None = None  # OpenSSH private key text for /etc/ssh/ssh_host_ed25519_key
    host_key_pub: str | None = None
    root_disk: str | None = None
    poweroff: bool = True
    marker: str = "/etc/metalplane/provisioned"
    marker_content: str = "lab-build-1\n"
    extra: dict[str, str] = field(default_factory=dict)  # flavour-specific overrides

    @property
    def netmask(self) -> str:
        bits = (0xFFFFFFFF << (32 - self.prefix)) & 0xFFFFFFFF
        return ".".join(str((bits >> s) & 0xFF) for s in (24, 16, 8, 0))


def _heredoc(path: str, content: str, mode: str) -> str:
    return f"cat > {path} <<'EOF'\n{content.rstrip()}\nEOF\nchmod {mode} {path}\n"


def kickstart_files(spec: HostSpec, *, cmdline_extra: str = "", grub_timeout: int | None = 1) -> dict[str, bytes]:
    """An EL-style ISO: kickstart at /ks.cfg named by ``inst.ks=hd:LABEL=...`` in ISOLINUX and GRUB."""
    lines = ["text", "lang en_US.UTF-8", "keyboard us", "timezone UTC --utc", "rootpw --lock"]
    device = spec.extra.get("device", spec.mac)
    network = f"network --bootproto=static --device={device} --ip={spec.address} --netmask={spec.netmask}"
    if spec.gateway:
        network += f" --gateway={spec.gateway}"
    lines.append(network + f" --hostname={spec.hostname} --activate --onboot=yes")
    if spec.root_disk:
        lines += [f"ignoredisk --only-use={spec.root_disk}", f"clearpart --all --initlabel --drives={spec.root_disk}"]
    if spec.extra.get("partitioning", "autopart") == "autopart":
        lines.append("autopart --type=lvm")
    if spec.authorized_key:
        lines.append(f'sshkey --username=root "{spec.authorized_key}"')
    if spec.poweroff:
        lines.append("poweroff")
    elif spec.extra.get("final"):
        lines.append(spec.extra["final"])
    lines += ["%packages", "@core", "%end", "%post --erroronfail"]
    post = f"mkdir -p {spec.marker.rsplit('/', 1)[0]}\n" + _heredoc(spec.marker, spec.marker_content, "0644")
    if spec.host_key:
        post += _heredoc("/etc/ssh/ssh_host_ed25519_key", spec.host_key, "0600")
    if spec.host_key_pub:
        post += _heredoc("/etc/ssh/ssh_host_ed25519_key.pub", spec.host_key_pub, "0644")
    lines += [post.rstrip(), "%end"]
    args = f"inst.stage2=hd:LABEL={DEFAULT_VOLUME_ID} inst.ks=hd:LABEL={DEFAULT_VOLUME_ID}:/ks.cfg {cmdline_extra}"
    return {
        "/ks.cfg": ("\n".join(lines) + "\n").encode(),
        "/isolinux/vmlinuz": KERNEL_STAND_IN,
        "/isolinux/initrd.img": gzip.compress(make_cpio(INITRD_BASE_FILES)),
        "/isolinux/isolinux.cfg": isolinux_cfg("vmlinuz", f"initrd=initrd.img {args.strip()}").encode(),
        "/EFI/BOOT/grub.cfg": grub_cfg(
            "/images/pxeboot/vmlinuz", args.strip(), "/images/pxeboot/initrd.img", timeout=grub_timeout
        ).encode(),
        "/images/pxeboot/vmlinuz": KERNEL_STAND_IN,
        "/images/pxeboot/initrd.img": gzip.compress(make_cpio(INITRD_BASE_FILES)),
    }


def autoinstall_files(
    spec: HostSpec, *, cmdline: str = 'autoinstall "ds=nocloud;s=/cdrom/nocloud/"'
) -> dict[str, bytes]:
    """An Ubuntu-style ISO: GRUB (BIOS eltorito.img and UEFI) booting casper with a NoCloud seed."""
    ethernet: dict[str, object] = {
        "match": {"macaddress": spec.mac},
        "set-name": "eno1",
        "addresses": [f"{spec.address}/{spec.prefix}"],
        "nameservers": {"addresses": [spec.gateway or spec.address]},
    }
    if spec.gateway:
        ethernet["routes"] = [{"to": "default", "via": spec.gateway}]
    auto: dict[str, object] = {
        "version": 1,
        "identity": {"hostname": spec.hostname, "username": "ubuntu", "password": "$6$lab$locked"},
        "network": {"version": 2, "ethernets": {"boot": ethernet}},
        "ssh": {
            "install-server": True,
            "allow-pw": False,
            "authorized-keys": [spec.authorized_key] if spec.authorized_key else [],
        },
        "storage": {"layout": {"name": "lvm", **({"match": {"path": spec.root_disk}} if spec.root_disk else {})}},
        "late-commands": [
            f"mkdir -p /target{spec.marker.rsplit('/', 1)[0]}",
            f"printf '%s' '{spec.marker_content}' > /target{spec.marker}",
        ],
    }
    user_data: dict[str, object] = {}
    if spec.host_key:
        user_data["ssh_keys"] = {"ed25519_private": spec.host_key, "ed25519_public": spec.host_key_pub or ""}
    if user_data:
        auto["user-data"] = user_data
    if spec.poweroff:
        auto["shutdown"] = "poweroff"
    text = "#cloud-config\n" + yaml.safe_dump({"autoinstall": auto}, sort_keys=False)
    return {
        "/nocloud/user-data": text.encode(),
        "/nocloud/meta-data": b"instance-id: lab-1\n",
        "/casper/vmlinuz": KERNEL_STAND_IN,
        "/casper/initrd": gzip.compress(make_cpio(INITRD_BASE_FILES)),
        "/boot/grub/i386-pc/eltorito.img": b"GRUB eltorito stand-in",
        "/boot/grub/grub.cfg": grub_cfg("/casper/vmlinuz", f"{cmdline} ---", "/casper/initrd").encode(),
    }


def preseed_text(spec: HostSpec) -> str:
    lines = [
        "d-i debian-installer/locale string en_US.UTF-8",
        "d-i keyboard-configuration/xkb-keymap select us",
        f"d-i netcfg/choose_interface select {spec.extra.get('device', 'auto')}",
        "d-i netcfg/disable_autoconfig boolean true",
        f"d-i netcfg/get_ipaddress string {spec.address}",
        f"d-i netcfg/get_netmask string {spec.netmask}",
        f"d-i netcfg/get_gateway string {spec.gateway or ''}",
        f"d-i netcfg/get_nameservers string {spec.gateway or ''}",
        "d-i netcfg/confirm_static boolean true",
        f"d-i netcfg/get_hostname string {spec.hostname}",
        "d-i passwd/root-login boolean true",
        "d-i passwd/root-password-crypted password !",
        "d-i partman-auto/method string lvm",
        "d-i partman/confirm boolean true",
        "d-i partman/confirm_nooverwrite boolean true",
        "d-i pkgsel/include string openssh-server python3",
    ]
    if spec.root_disk:
        lines.append(f"d-i partman-auto/disk string {spec.root_disk}")
    late = [f"mkdir -p /target{spec.marker.rsplit('/', 1)[0]}", f"cp /marker /target{spec.marker}"]
    if spec.authorized_key:
        late += ["mkdir -p /target/root/.ssh", "cp /authorized_keys /target/root/.ssh/authorized_keys"]
        late.append("chmod 600 /target/root/.ssh/authorized_keys")
    if spec.host_key:
        late += ["cp /ssh_host_ed25519_key /target/etc/ssh/ssh_host_ed25519_key"]
        late.append("chmod 600 /target/etc/ssh/ssh_host_ed25519_key")
    lines.append("d-i preseed/late_command string " + "; \\\n  ".join(late))
    if spec.poweroff:
        lines.append("d-i debian-installer/exit/poweroff boolean true")
    return "\n".join(lines) + "\n"


def preseed_files(spec: HostSpec, *, cmdline: str = "auto=true priority=critical") -> dict[str, bytes]:
    """A Debian-style ISO: ISOLINUX + GRUB booting d-i; preseed.cfg in a cpio appended to the initrd."""
    extra = {"preseed.cfg": preseed_text(spec).encode(), "marker": spec.marker_content.encode()}
    if spec.authorized_key:
        extra["authorized_keys"] = (spec.authorized_key + "\n").encode()
    if spec.host_key:
        extra["ssh_host_ed25519_key"] = spec.host_key.encode()
    initrd = gzip.compress(make_cpio(INITRD_BASE_FILES)) + make_cpio(extra)
    return {
        "/install.amd/vmlinuz": KERNEL_STAND_IN,
        "/install.amd/initrd.gz": initrd,
        "/isolinux/isolinux.cfg": isolinux_cfg(
            "/install.amd/vmlinuz", f"initrd=/install.amd/initrd.gz {cmdline} --- quiet"
        ).encode(),
        "/boot/grub/grub.cfg": grub_cfg(
            "/install.amd/vmlinuz", f"{cmdline} --- quiet", "/install.amd/initrd.gz"
        ).encode(),
    }
