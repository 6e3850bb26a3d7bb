"""The lab's ISO reader follows an installer ISO as firmware and installer would (lab.metal.iso_reader)."""

from __future__ import annotations

import gzip
import lzma
from collections.abc import Callable
from pathlib import Path

import pytest

from lab.metal import iso_reader, testiso
from lab.metal.iso_reader import InstallConfig, MediaError, parse_grub_cfg, parse_isolinux_cfg, read_install_media
from lab.metal.testiso import HostSpec, build_iso, make_cpio

MAC = "f8:bc:12:aa:bb:cc"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTheLabReaderTests lab@controller"
HOST_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
Files = dict[str, bytes]
# flavour -> (files builder, build_iso keyword arguments, the user the authorized key is for)
FLAVOURS: dict[str, tuple[Callable[..., Files], dict[str, str], str]] = {
    "kickstart": (testiso.kickstart_files, {}, "root"),
    "autoinstall": (testiso.autoinstall_files, {"bios_boot": "/boot/grub/i386-pc/eltorito.img"}, "ubuntu"),
    "preseed": (testiso.preseed_files, {}, "root"),
}


def spec(**changes: object) -> HostSpec:
    values: dict[str, object] = {
        "mac": MAC,
        "address": "127.77.0.10",
        "gateway": "127.77.0.1",
        "authorized_key": KEY,
        "host_key": HOST_KEY,
        "root_disk": "/dev/disk/by-id/wwn-0x5000c500deadbeef",
    }
    values.update(changes)
    return HostSpec(**values)  # type: ignore[arg-type]


def read(tmp_path: Path, flavour: str, files: Files, firmware: str, **build: object) -> InstallConfig:
    kwargs = {**FLAVOURS[flavour][1], **build}
    return read_install_media(build_iso(tmp_path / f"{flavour}.iso", files, **kwargs), firmware)  # type: ignore[arg-type]


def edit(files: Files, path: str, old: str, new: str) -> Files:
    text = files[path].decode()
    assert old in text, f"{old!r} not in {path}"
    return {**files, path: text.replace(old, new).encode()}


@pytest.mark.parametrize("firmware", ["Bios", "Uefi"])
@pytest.mark.parametrize("flavour", list(FLAVOURS))
def test_a_good_configuration_is_read_through_the_boot_entry(tmp_path: Path, flavour: str, firmware: str) -> None:
    builder, _kwargs, user = FLAVOURS[flavour]
    config = read(tmp_path, flavour, builder(spec()), firmware)
    assert (config.flavour, config.prompt, config.error) == (flavour, None, None)
    assert config.hostname == "node1"
    network = config.networks[0]
    assert (network.method, network.address, network.prefix, network.gateway) == (
        "static",
        "127.77.0.10",
        24,
        "127.77.0.1",
    )
    assert network.device in (MAC, "auto")
    assert config.authorized_keys[user] == [KEY]
    assert {path: key.strip() for path, key in config.host_keys.items()} == {
        "/etc/ssh/ssh_host_ed25519_key": HOST_KEY.encode()
    }
    assert config.files["/etc/metalplane/provisioned"].content.strip() == b"lab-build-1"
    assert config.root_disk == "/dev/disk/by-id/wwn-0x5000c500deadbeef"
    assert config.final_action == "poweroff"
    assert config.ssh_server is True


KS_GRUB, KS_ISOLINUX, KS = "/EFI/BOOT/grub.cfg", "/isolinux/isolinux.cfg", "/ks.cfg"
AI_DATA, AI_GRUB = "/nocloud/user-data", "/boot/grub/grub.cfg"
PS_ISOLINUX = "/isolinux/isolinux.cfg"


def _ks(**kw: object) -> Files:
    return testiso.kickstart_files(spec(), **kw)  # type: ignore[arg-type]


# (case, flavour, files, firmware, "prompt" | "error", what the reason says)
STOPS: list[tuple[str, str, Files, str, str, str]] = [
    ("grub without timeout waits", "kickstart", _ks(grub_timeout=None), "Uefi", "prompt", "sets no timeout"),
    ("grub timeout -1 waits", "kickstart", _ks(grub_timeout=-1), "Uefi", "prompt", "timeout=-1"),
    (
        "isolinux prompt without timeout waits",
        "kickstart",
        edit(_ks(), KS_ISOLINUX, "prompt 0\ntimeout 1", "prompt 1\ntimeout 0"),
        "Bios",
        "prompt",
        "ISOLINUX waits",
    ),
    (
        "kickstart without partitioning",
        "kickstart",
        edit(_ks(), KS, "autopart --type=lvm\n", ""),
        "Bios",
        "prompt",
        "Installation Destination",
    ),
    (
        "kickstart on a volume with another label",
        "kickstart",
        edit(_ks(), KS_GRUB, "inst.ks=hd:LABEL=METALPLANE-LAB:", "inst.ks=hd:LABEL=OTHER:"),
        "Uefi",
        "error",
        "volume id",
    ),
    (
        "kickstart file not on the ISO",
        "kickstart",
        edit(_ks(), KS_GRUB, ":/ks.cfg", ":/missing.cfg"),
        "Uefi",
        "error",
        "not on the ISO",
    ),
    (
        "kickstart key for a user it never creates",
        "kickstart",
        edit(_ks(), KS, "--username=root", "--username=core"),
        "Bios",
        "error",
        "no such user",
    ),
    (
        "kickstart from the network",
        "kickstart",
        edit(_ks(), KS_GRUB, "inst.ks=hd:LABEL=METALPLANE-LAB:/ks.cfg", "inst.ks=http://10.0.0.1/ks.cfg"),
        "Uefi",
        "error",
        "needs the network",
    ),
    (
        "autoinstall without the kernel flag asks to continue",
        "autoinstall",
        testiso.autoinstall_files(spec(), cmdline='"ds=nocloud;s=/cdrom/nocloud/"'),
        "Uefi",
        "prompt",
        "Continue with autoinstall",
    ),
    (
        "autoinstall seed without meta-data",
        "autoinstall",
        {k: v for k, v in testiso.autoinstall_files(spec()).items() if k != "/nocloud/meta-data"},
        "Bios",
        "prompt",
        "meta-data is not on the ISO",
    ),
    (
        "autoinstall with interactive sections",
        "autoinstall",
        edit(
            testiso.autoinstall_files(spec()),
            AI_DATA,
            "  version: 1\n",
            "  version: 1\n  interactive-sections: [network]\n",
        ),
        "Uefi",
        "prompt",
        "interactive-sections",
    ),
    (
        "autoinstall seed named nowhere",
        "autoinstall",
        testiso.autoinstall_files(spec(), cmdline="autoinstall"),
        "Uefi",
        "prompt",
        "names no ds=nocloud",
    ),
    (
        "preseed without priority=critical",
        "preseed",
        testiso.preseed_files(spec(), cmdline="auto=true"),
        "Bios",
        "prompt",
        "priority=critical",
    ),
    (
        "preseed that does not confirm partitioning",
        "preseed",
        {
            **testiso.preseed_files(spec()),
            "/install.amd/initrd.gz": gzip.compress(make_cpio({"init": b""}))
            + make_cpio(
                {"preseed.cfg": testiso.preseed_text(spec()).replace("partman/confirm boolean", "x y").encode()}
            ),
        },
        "Bios",
        "prompt",
        "partman/confirm",
    ),
    (
        "an entry that names no configuration",
        "preseed",
        {**testiso.preseed_files(spec(), cmdline="quiet"), "/install.amd/initrd.gz": gzip.compress(make_cpio({}))},
        "Uefi",
        "prompt",
        "starts interactively",
    ),
]


@pytest.mark.parametrize(
    ("flavour", "files", "firmware", "kind", "says"), [c[1:] for c in STOPS], ids=[c[0] for c in STOPS]
)
def test_the_installer_would_stop(
    tmp_path: Path, *, flavour: str, files: Files, firmware: str, kind: str, says: str
) -> None:
    config = read(tmp_path, flavour, files, firmware)
    reason = config.prompt if kind == "prompt" else config.error
    assert reason is not None, (config.prompt, config.error)
    assert says in reason
    assert config.stops == reason


# (case, build_iso keywords, firmware, what the firmware says)
UNBOOTABLE: list[tuple[str, dict[str, object], str, str]] = [
    ("UEFI firmware, BIOS-only ISO", {"efi_boot": None}, "Uefi", "no UEFI"),
    ("BIOS firmware, UEFI-only ISO", {"bios_boot": None}, "Bios", "no BIOS"),
    ("no El Torito catalog", {"bios_boot": None, "efi_boot": None}, "Bios", "no El Torito boot catalog"),
    (
        "EFI image without the removable-media loader",
        {"efi_boot": "/images/efiboot.img", "extra": {"/images/efiboot.img": b"\x00" * 4096}},
        "Uefi",
        "BOOTX64.EFI",
    ),
]


@pytest.mark.parametrize(("build", "firmware", "says"), [c[1:] for c in UNBOOTABLE], ids=[c[0] for c in UNBOOTABLE])
def test_the_firmware_finds_nothing_to_boot(tmp_path: Path, build: dict[str, object], firmware: str, says: str) -> None:
    files = {**_ks(), **dict(build.pop("extra", {}))}  # type: ignore[arg-type]
    with pytest.raises(MediaError, match=says.replace(".", r"\.")):
        read_install_media(build_iso(tmp_path / "x.iso", files, **build), firmware)  # type: ignore[arg-type]


# (case, flavour, files, the installer's final action)
FINAL: list[tuple[str, str, Files, str]] = [
    ("kickstart poweroff", "kickstart", _ks(), "poweroff"),
    ("kickstart without one halts", "kickstart", testiso.kickstart_files(spec(poweroff=False)), "halt"),
    (
        "kickstart reboot",
        "kickstart",
        testiso.kickstart_files(spec(poweroff=False, extra={"final": "reboot"})),
        "reboot",
    ),
    ("autoinstall shutdown: poweroff", "autoinstall", testiso.autoinstall_files(spec()), "poweroff"),
    ("autoinstall default reboots", "autoinstall", testiso.autoinstall_files(spec(poweroff=False)), "reboot"),
    ("preseed exit/poweroff", "preseed", testiso.preseed_files(spec()), "poweroff"),
    ("preseed default reboots", "preseed", testiso.preseed_files(spec(poweroff=False)), "reboot"),
]


@pytest.mark.parametrize(("flavour", "files", "action"), [c[1:] for c in FINAL], ids=[c[0] for c in FINAL])
def test_final_action(tmp_path: Path, flavour: str, files: Files, action: str) -> None:
    assert read(tmp_path, flavour, files, "Uefi").final_action == action


# ---------------------------------------------------------------------------- boot loaders
GRUB = """
set timeout=5
set default="{default}"
menuentry 'Test this media & install' --id check {{
  linuxefi /images/pxeboot/vmlinuz inst.ks=cdrom:/a.cfg rd.live.check
  initrdefi /images/pxeboot/initrd.img
}}
submenu 'Troubleshooting' {{
  menuentry 'Rescue' {{
    linux /vmlinuz inst.rescue
  }}
}}
menuentry "Install" --id=install {{
  linux /casper/vmlinuz autoinstall "ds=nocloud;s=/cdrom/nocloud/" ---
  initrd /casper/initrd
}}
"""


@pytest.mark.parametrize(
    ("default", "title", "args"),
    [
        ("0", "Test this media & install", ("inst.ks=cdrom:/a.cfg", "rd.live.check")),
        ("1", "Install", ("autoinstall", "ds=nocloud;s=/cdrom/nocloud/", "---")),
        ("install", "Install", ("autoinstall", "ds=nocloud;s=/cdrom/nocloud/", "---")),
        ("Test this media & install", "Test this media & install", ("inst.ks=cdrom:/a.cfg", "rd.live.check")),
    ],
)
def test_grub_default_entry(default: str, title: str, args: tuple[str, ...]) -> None:
    entry = parse_grub_cfg(GRUB.format(default=default))
    assert (entry.title, entry.cmdline, entry.waits) == (title, args, None)


ISOLINUX = """
ui vesamenu.c32
timeout {timeout}
label check
  menu label ^Test this media & install
  kernel vmlinuz
  append initrd=initrd.img inst.ks=cdrom:/ks.cfg rd.live.check
label linux
  menu label ^Install
  {menu_default}
  kernel vmlinuz
  append initrd=initrd.img inst.ks=cdrom:/ks.cfg quiet
"""


@pytest.mark.parametrize(
    ("timeout", "menu_default", "label", "waits"),
    [("600", "menu default", "linux", False), ("600", "", "check", False), ("0", "menu default", "linux", True)],
)
def test_isolinux_default_label(timeout: str, menu_default: str, label: str, waits: bool) -> None:
    entry = parse_isolinux_cfg(ISOLINUX.format(timeout=timeout, menu_default=menu_default), "/isolinux/isolinux.cfg")
    assert (entry.title, entry.initrds, entry.waits is not None) == (label, ("initrd.img",), waits)
    assert "inst.ks=cdrom:/ks.cfg" in entry.cmdline


@pytest.mark.parametrize(
    "pack",
    [
        lambda base, extra: gzip.compress(base) + extra,
        lambda base, extra: gzip.compress(base) + gzip.compress(extra),
        lambda base, extra: lzma.compress(base, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32) + extra,
        lambda base, extra: base + b"\x00" * 512 + extra,
    ],
    ids=["gzip+cpio", "gzip+gzip", "xz+cpio", "cpio+padding+cpio"],
)
def test_initrd_archives_are_read_in_order(pack: Callable[[bytes, bytes], bytes]) -> None:
    base = make_cpio({"init": b"base", "preseed.cfg": b"old"})
    extra = make_cpio({"./preseed.cfg": b"new", "authorized_keys": b"k"})
    assert iso_reader.read_initrd(pack(base, extra)) == {
        "init": b"base",
        "preseed.cfg": b"new",
        "authorized_keys": b"k",
    }


# ---------------------------------------------------------------------------- shell subset
SCRIPTS: list[tuple[str, str, str, dict[str, tuple[bytes, int]]]] = [
    ("heredoc", "", "cat > /etc/a <<'EOF'\nline $HOME\nEOF\nchmod 0600 /etc/a", {"/etc/a": (b"line $HOME\n", 0o600)}),
    ("echo and append", "", "echo one > /x; echo two >> /x", {"/x": (b"one\ntwo\n", 0o644)}),
    ("printf", "/target", "printf '%s\\n' a b > /target/p", {"/p": (b"a\nb\n", 0o644)}),
    ("writes outside the target are not installed", "/target", "echo x > /tmp/y", {}),
    ("in-target", "/target", "in-target sh -c 'echo k > /root/k && chmod 600 /root/k'", {"/root/k": (b"k\n", 0o600)}),
    ("cp from the cdrom", "/target", "cp /cdrom/ks.cfg /target/etc/copied", {"/etc/copied": (b"KS\n", 0o644)}),
    ("install -m", "/target", "install -m 0640 /cdrom/ks.cfg /target/etc/i", {"/etc/i": (b"KS\n", 0o640)}),
    (
        "rm after use (d-i's late_command)",
        "/target",
        "cp /cdrom/ks.cfg /target/root/f.sh && in-target sh -c 'echo k > /root/k' && rm -f /target/root/f.sh",
        {"/root/k": (b"k\n", 0o644)},
    ),
    ("rm -r", "", "mkdir -p /d && echo a > /d/a && echo b > /b && rm -rf /d", {"/b": (b"b\n", 0o644)}),
    (
        "rm outside the target removes nothing installed",
        "/target",
        "echo a > /target/a; rm -f /a",
        {"/a": (b"a\n", 0o644)},
    ),
    (
        "curtin in-target",
        "/target",
        "curtin in-target --target=/target -- sh -c 'echo c > /c'",
        {"/c": (b"c\n", 0o644)},
    ),
]


@pytest.mark.parametrize(("target", "script", "expected"), [s[1:] for s in SCRIPTS], ids=[s[0] for s in SCRIPTS])
def test_shell_subset(target: str, script: str, expected: dict[str, tuple[bytes, int]]) -> None:
    entry = iso_reader.BootEntry("grub", "/g", "t", "/k", (), ())
    config = InstallConfig("kickstart", entry)
    sources = {"/cdrom/ks.cfg": b"KS\n"}
    iso_reader._Script(config, target, sources.get).run(script)
    assert {path: (spec.content, spec.mode) for path, spec in config.files.items()} == expected
