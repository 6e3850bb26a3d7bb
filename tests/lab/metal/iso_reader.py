"""Read an installer ISO the way a server's firmware and installer would, and say what it installs.

Why: a simulated host must install *what the ISO really configures*, so a playbook that builds a
wrong ISO (wrong MAC, no SSH key, a boot entry that waits at a menu) fails in the lab as it would
on an R730. So nothing here trusts a side channel: the reader starts at the El Torito boot catalog
(ECMA-119 + the El Torito specification), picks the entry the firmware would boot (BIOS: platform
0x00, UEFI: 0xEF), finds the boot loader's configuration where that loader looks for it, takes the
default entry and its kernel command line, and follows the command line to the configuration:

- EL (Anaconda): ``inst.ks=`` (or legacy ``ks=``) naming a kickstart on the ISO
  (``cdrom:/ks.cfg``, ``hd:LABEL=<volume id>:/ks.cfg``, ``hd:sr0:/ks.cfg``) - Anaconda's boot
  options documentation.
- Ubuntu (subiquity): ``autoinstall`` plus ``ds=nocloud;s=/cdrom/<dir>/`` with ``user-data`` and
  ``meta-data`` in that directory - Ubuntu's autoinstall documentation and cloud-init's NoCloud
  datasource.
- Debian (d-i): ``preseed.cfg`` at the root of a cpio archive appended to the initrd, plus
  ``auto=true priority=critical`` - the Debian installation guide, appendix B (initrd preseeding).

Only what the host lifecycle needs is parsed: hostname, network by device/MAC, authorized keys,
files written into the target (SSH host keys, marker files), root disk, the final power action,
and whether the installer would stop and ask. Everything else in the configuration is ignored,
not rejected: a real installer accepts far more than this reader understands.
"""

from __future__ import annotations

import base64
import gzip
import io
import ipaddress
import lzma
import posixpath
import re
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pycdlib
import yaml

# El Torito platform ids (El Torito specification 1.0, section 2.1; 0xEF added for UEFI by the
# UEFI specification, section 13.3.2.1): which catalog entry a firmware in each mode boots.
PLATFORM_BY_FIRMWARE = {"Bios": 0x00, "Uefi": 0xEF}
# Where each boot loader reads its configuration on the ISO when booted from the given image.
# ISOLINUX looks in its own directory first, then these (syslinux wiki, "ISOLINUX"); the GRUB EFI
# images of Fedora/RHEL read /EFI/BOOT/grub.cfg, Debian's and Ubuntu's /boot/grub/grub.cfg.
ISOLINUX_CONFIG_DIRS = ("/boot/isolinux", "/isolinux", "/boot/syslinux", "/syslinux", "/")
GRUB_CONFIGS = ("/EFI/BOOT/grub.cfg", "/boot/grub/grub.cfg", "/boot/grub/loopback.cfg")
# The 8.3 directory entry of the removable-media UEFI loader inside the EFI system partition
# image (UEFI specification 3.5.1.1, \EFI\BOOT\BOOTX64.EFI): without it, UEFI boots nothing.
EFI_LOADER_83_NAME = b"BOOTX64 EFI"
# cpio "newc" archive magics (the kernel's initramfs buffer format, Documentation/driver-api/
# early-userspace/buffer-format.rst) and the compressions the kernel accepts that stdlib reads.
CPIO_MAGICS = (b"070701", b"070702")
CPIO_TRAILER = "TRAILER!!!"
GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
SSH_HOST_KEY_DIR = "/etc/ssh/"


class MediaError(Exception):
    """The ISO cannot be booted at all in this firmware mode (the firmware finds nothing to start)."""


@dataclass(frozen=True)
class BootEntry:
    """The boot loader entry that starts by default, and whether the loader waits for a key first."""

    loader: str  # "grub" | "isolinux"
    config_path: str  # the loader configuration on the ISO
    title: str
    kernel: str
    cmdline: tuple[str, ...]
    initrds: tuple[str, ...]
    waits: str | None = None  # why the menu would wait for input, if it would

    def arg(self, *names: str) -> str | None:
        """The value of the first ``name=value`` kernel argument among ``names``."""
        for token in self.cmdline:
            key, sep, value = token.partition("=")
            if sep and key in names:
                return value
        return None

    def flag(self, name: str) -> bool:
        return name in self.cmdline


@dataclass(frozen=True)
class Network:
    """One interface's configuration as written: ``device`` is a MAC, a name, ``link`` or ``bootif``."""

    device: str
    method: str  # "static" | "dhcp"
    address: str | None = None
    prefix: int | None = None
    gateway: str | None = None
    nameservers: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileSpec:
    content: bytes
    mode: int = 0o644


@dataclass
class InstallConfig:
    """What an installer would do with this ISO; ``prompt``/``error`` say why it would stop instead."""

    flavour: str  # "kickstart" | "preseed" | "autoinstall" | "none"
    entry: BootEntry
    source: str = ""  # where the configuration was found
    hostname: str | None = None
    networks: list[Network] = field(default_factory=list)
    users: list[str] = field(default_factory=lambda: ["root"])
    authorized_keys: dict[str, list[str]] = field(default_factory=dict)
    root_disk: str | None = None  # the disk the configuration names, as written
    files: dict[str, FileSpec] = field(default_factory=dict)  # written into the installed system
    dirs: dict[str, int] = field(default_factory=dict)
    final_action: str = "reboot"  # "poweroff" | "reboot" | "halt"
    ssh_server: bool = True
    prompt: str | None = None  # the installer would stop and ask (hangs unattended)
    error: str | None = None  # the installer would fail (hangs at an error screen)
    ignored_commands: list[str] = field(default_factory=list)

    @property
    def host_keys(self) -> dict[str, bytes]:
        """Private SSH host keys the configuration writes (``/etc/ssh/ssh_host_*_key``)."""
        return {
            path: spec.content
            for path, spec in self.files.items()
            if path.startswith(SSH_HOST_KEY_DIR + "ssh_host_") and path.endswith("_key")
        }

    @property
    def stops(self) -> str | None:
        return self.prompt or self.error

    def summary(self) -> dict[str, Any]:
        return {
            "flavour": self.flavour,
            "source": self.source,
            "entry": self.entry.title,
            "hostname": self.hostname,
            "networks": [vars(n) for n in self.networks],
            "users": list(self.users),
            "authorized_keys": {user: len(keys) for user, keys in self.authorized_keys.items()},
            "root_disk": self.root_disk,
            "files": sorted(self.files),
            "final_action": self.final_action,
            "ssh_server": self.ssh_server,
            "prompt": self.prompt,
            "error": self.error,
        }


# ----------------------------------------------------------------------------------- the ISO
class IsoImage:
    """Path lookup and reads on an ISO 9660 image, by Rock Ridge, Joliet or plain ISO 9660 names."""

    def __init__(self, path: Path) -> None:
        self._iso = pycdlib.PyCdlib()
        self._iso.open(str(path))
        self.volume_id = self._iso.pvd.volume_identifier.decode("ascii", "replace").strip()
        if self._iso.has_rock_ridge():
            self._facade, self._case_sensitive = "rr_path", True
        elif self._iso.has_joliet():
            self._facade, self._case_sensitive = "joliet_path", False
        else:
            self._facade, self._case_sensitive = "iso_path", False
        self._paths: dict[str, str] = {}  # lookup key -> path in the chosen facade
        self._by_extent: dict[int, str] = {}
        for root, _dirs, files in self._iso.walk(**{self._facade: "/"}):
            for name in files:
                actual = posixpath.join(root, name)
                shown = _clean_iso_name(actual) if self._facade == "iso_path" else actual
                self._paths[self._key(shown)] = actual
                record = self._iso.get_record(**{self._facade: actual})
                self._by_extent[record.extent_location()] = shown

    def close(self) -> None:
        self._iso.close()

    def _key(self, path: str) -> str:
        path = posixpath.normpath("/" + path.lstrip("/"))
        return path if self._case_sensitive else path.lower()

    def exists(self, path: str) -> bool:
        return self._key(path) in self._paths

    def read(self, path: str) -> bytes | None:
        actual = self._paths.get(self._key(path))
        if actual is None:
            return None
        out = io.BytesIO()
        self._iso.get_file_from_iso_fp(out, **{self._facade: actual})
        return out.getvalue()

    def paths(self) -> list[str]:
        """Every regular file's path, as ``read`` takes it."""
        return sorted(self._paths)

    def boot_images(self) -> list[tuple[int, str | None]]:
        """``(platform id, path of the boot image)`` for every El Torito entry, initial entry first."""
        catalog = self._iso.eltorito_boot_catalog
        if catalog is None:
            return []
        found = [(catalog.validation_entry.platform_id, self._by_extent.get(catalog.initial_entry.load_rba))]
        for section in catalog.sections:
            for entry in section.section_entries:
                found.append((section.platform_id, self._by_extent.get(entry.load_rba)))
        return found


def _clean_iso_name(path: str) -> str:
    """``/ISOLINUX/ISOLINUX.CFG;1`` -> ``/ISOLINUX/ISOLINUX.CFG`` (version and empty extension dropped)."""
    parts = []
    for part in path.split("/"):
        name = part.split(";", 1)[0]
        parts.append(name[:-1] if name.endswith(".") else name)
    return "/".join(parts)


# ---------------------------------------------------------------------------- boot loaders
def find_boot_entry(iso: IsoImage, firmware: str) -> BootEntry:
    """The entry the firmware (``Bios`` or ``Uefi``) would start; MediaError if it would start none."""
    platform = PLATFORM_BY_FIRMWARE.get(firmware)
    if platform is None:
        raise MediaError(f"unknown firmware mode {firmware!r}; the lab BMCs report Bios or Uefi")
    images = [path for pid, path in iso.boot_images() if pid == platform]
    if not iso.boot_images():
        raise MediaError("the ISO has no El Torito boot catalog: the firmware finds nothing to boot on it")
    if not images:
        kind = "UEFI (platform 0xEF)" if platform == 0xEF else "BIOS (platform 0x00)"
        raise MediaError(f"the ISO's El Torito catalog has no {kind} entry; {firmware} firmware cannot boot it")
    image = images[0]
    if image is None:
        raise MediaError("the El Torito entry points at no file on the ISO")
    if platform == 0xEF:
        data = iso.read(image) or b""
        if EFI_LOADER_83_NAME not in data:
            raise MediaError(f"the UEFI boot image {image} holds no \\EFI\\BOOT\\BOOTX64.EFI")
        return _grub_entry(iso)
    if posixpath.basename(image).lower() == "isolinux.bin":
        return _isolinux_entry(iso, posixpath.dirname(image))
    return _grub_entry(iso)  # GRUB's El Torito image (i386-pc/eltorito.img) reads /boot/grub


def _grub_entry(iso: IsoImage) -> BootEntry:
    for path in GRUB_CONFIGS:
        text = iso.read(path)
        if text is not None:
            return parse_grub_cfg(text.decode("utf-8", "replace"), path)
    raise MediaError(f"GRUB finds no configuration (looked for {', '.join(GRUB_CONFIGS)}) and stops at its prompt")


def _isolinux_entry(iso: IsoImage, own_dir: str) -> BootEntry:
    for directory in (own_dir, *ISOLINUX_CONFIG_DIRS):
        path = posixpath.join(directory, "isolinux.cfg")
        text = iso.read(path)
        if text is not None:

            def include(name: str, _base: str = directory) -> str:
                data = iso.read(name if name.startswith("/") else posixpath.join(_base, name))
                return data.decode("utf-8", "replace") if data is not None else ""

            return parse_isolinux_cfg(text.decode("utf-8", "replace"), path, include)
    raise MediaError("ISOLINUX finds no isolinux.cfg and stops at its boot: prompt")


def _grub_words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True, posix=True)
    except ValueError:
        return line.split()


def parse_grub_cfg(text: str, path: str = "/boot/grub/grub.cfg") -> BootEntry:
    """The default ``menuentry`` of a grub.cfg, its ``linux`` line, and whether GRUB would wait.

    GRUB manual, "Simple configuration" / "default" and "timeout": ``default`` is an index, a title
    or an ``--id``; an unset timeout or ``-1`` waits for a key forever, ``0`` boots at once.
    Entries inside ``submenu`` blocks are ignored.
    """
    settings: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    depth = 0
    for raw in text.splitlines():
        words = _grub_words(raw)
        if not words:
            continue
        if words[0] == "submenu":
            depth += 1
            continue
        if words[0] == "menuentry" and depth == 0:
            ident = next((w.split("=", 1)[1] for w in words if w.startswith("--id=")), None)
            if "--id" in words:
                ident = words[words.index("--id") + 1]
            current = {"title": words[1] if len(words) > 1 else "", "id": ident, "linux": None, "initrd": []}
            entries.append(current)
            continue
        if words[0] == "}":
            if current is not None:
                current = None
            elif depth:
                depth -= 1
            continue
        if current is not None and words[0] in ("linux", "linuxefi", "linux16"):
            current["linux"] = words[1:]
        elif current is not None and words[0] in ("initrd", "initrdefi", "initrd16"):
            current["initrd"] = words[1:]
        elif words[0] == "set" and len(words) > 1 and "=" in words[1]:
            key, _sep, value = words[1].partition("=")
            settings[key] = value
    if not entries:
        raise MediaError(f"{path} has no menuentry: GRUB stops at its prompt")
    default = settings.get("default", "0")
    chosen = entries[0]
    if default.isdigit():
        chosen = entries[int(default)] if int(default) < len(entries) else entries[0]
    else:
        chosen = next((e for e in entries if default in (e["title"], e["id"])), entries[0])
    timeout = settings.get("timeout")
    waits = None
    if timeout is None:
        waits = f"{path} sets no timeout: GRUB shows its menu and waits for a key"
    elif timeout.lstrip("-").isdigit() and int(timeout) < 0:
        waits = f"{path} sets timeout={timeout}: GRUB shows its menu and waits for a key"
    linux = chosen["linux"]
    if not linux:
        raise MediaError(f"the default GRUB entry {chosen['title']!r} in {path} has no linux line")
    return BootEntry("grub", path, chosen["title"], linux[0], tuple(linux[1:]), tuple(chosen["initrd"]), waits)


def parse_isolinux_cfg(text: str, path: str, include: Callable[[str], str] = lambda _name: "") -> BootEntry:
    """The default ``label`` of an isolinux.cfg, its kernel and ``append`` line, and whether it waits.

    syslinux documentation: ``DEFAULT`` names a label (``MENU DEFAULT`` wins under a ``UI`` menu),
    ``TIMEOUT`` is in tenths of a second and 0 means "wait forever" when a prompt or menu is shown.
    """
    labels: list[dict[str, Any]] = []
    settings: dict[str, str] = {}
    current: dict[str, Any] | None = None
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        words = lines[index].strip().split(None, 1)
        index += 1
        if not words or words[0].startswith("#"):
            continue
        keyword, rest = words[0].lower(), (words[1] if len(words) > 1 else "").strip()
        if keyword == "include":
            lines[index:index] = include(rest).splitlines()
            continue
        if keyword == "label":
            current = {"label": rest, "kernel": None, "append": "", "default": False, "initrd": []}
            labels.append(current)
        elif keyword in ("kernel", "linux") and current is not None:
            current["kernel"] = rest
        elif keyword == "append" and current is not None:
            current["append"] = rest
        elif keyword == "initrd" and current is not None:
            current["initrd"] = rest.split(",")
        elif keyword == "menu" and rest.lower() == "default" and current is not None:
            current["default"] = True
        elif keyword in ("default", "timeout", "prompt", "ui", "ontimeout"):
            settings[keyword] = rest
    if not labels:
        raise MediaError(f"{path} has no label: ISOLINUX stops at its boot: prompt")
    chosen = next((entry for entry in labels if entry["default"]), None)
    if chosen is None:
        wanted = settings.get("default", "").split()
        name = wanted[-1] if wanted else ""
        chosen = next((entry for entry in labels if entry["label"] == name), labels[0])
    shows = "ui" in settings or settings.get("prompt", "0").strip() not in ("", "0")
    timeout = settings.get("timeout", "0").strip()
    waits = None
    if shows and (not timeout.isdigit() or int(timeout) == 0):
        waits = f"{path} shows a boot prompt with timeout {timeout or 'unset'}: ISOLINUX waits for a key"
    if not chosen["kernel"]:
        raise MediaError(f"the default ISOLINUX label {chosen['label']!r} in {path} has no kernel")
    append = _grub_words(chosen["append"])
    initrds = list(chosen["initrd"])
    for word in append:
        if word.startswith("initrd="):
            initrds.extend(word.split("=", 1)[1].split(","))
    return BootEntry(
        "isolinux",
        path,
        chosen["label"],
        chosen["kernel"],
        tuple(w for w in append if not w.startswith("initrd=")),
        tuple(initrds),
        waits,
    )


# ------------------------------------------------------------------------------ the reader
def read_install_media(path: Path, firmware: str) -> InstallConfig:
    """Follow ``path`` (an ISO) from its boot catalog to the installer configuration it starts."""
    try:
        iso = IsoImage(path)
    except pycdlib.pycdlibexception.PyCdlibException as exc:
        raise MediaError(f"not a readable ISO 9660 image: {exc}") from exc
    try:
        entry = find_boot_entry(iso, firmware)
        config = _read_config(iso, entry)
        if entry.waits and config.prompt is None:
            config.prompt = entry.waits
        return config
    finally:
        iso.close()


def iso_files(path: Path) -> dict[str, bytes]:
    """Every regular file on the ISO by path, and every file of each initramfs archive on it as
    ``<archive>!<path>`` (decompressed): what anyone who can fetch the image can read from it."""
    iso = IsoImage(path)
    try:
        files: dict[str, bytes] = {}
        for name in iso.paths():
            data = iso.read(name) or b""
            files[name] = data
            if data[:6] in CPIO_MAGICS or data[:2] == GZIP_MAGIC or data[:6] == XZ_MAGIC:
                files.update({f"{name}!{inner}": content for inner, content in read_initrd(data).items()})
        return files
    finally:
        iso.close()


def _read_config(iso: IsoImage, entry: BootEntry) -> InstallConfig:
    if entry.arg("inst.ks", "ks") is not None:
        return read_kickstart(iso, entry)
    if entry.flag("autoinstall") or (entry.arg("ds") or "").startswith("nocloud"):
        return read_autoinstall(iso, entry)
    initrd_files = _initrd_files(iso, entry)
    if "preseed.cfg" in initrd_files or entry.arg("auto", "auto-install/enable") is not None:
        return read_preseed(entry, initrd_files, iso)
    return InstallConfig(
        "none",
        entry,
        prompt=f"the boot entry {entry.title!r} names no kickstart, autoinstall or preseed: the installer starts "
        "interactively and waits at its first screen",
    )


# ------------------------------------------------------------------------- shell subset
class _Script:
    """The file-writing subset of the shell that installer hooks run (``%post``, late commands).

    Supported: ``cat > F <<EOF`` here-documents, ``echo``/``printf`` redirected into a file,
    ``cp``, ``install``, ``mkdir``, ``chmod``, ``rm``, ``in-target`` / ``curtin in-target`` / ``sh -c``
    wrappers, and ``sh FILE`` (a script the configuration wrote, run the same way). A write outside
    the target root changes nothing installed. Any other command is recorded in
    ``ignored_commands`` (its effect is not simulated).
    """

    def __init__(
        self,
        config: InstallConfig,
        target: str,
        read_source: Callable[[str], bytes | None],
    ) -> None:
        self.config = config
        self.target = target.rstrip("/")
        self.read_source = read_source

    # -- paths
    def _installed(self, path: str, target: str) -> str | None:
        if not path.startswith("/"):
            return None
        if not target:
            return _norm(path)
        if path == target or path.startswith(target + "/"):
            return _norm(path[len(target) :])
        return None

    def _read(self, path: str, target: str) -> bytes | None:
        installed = self._installed(path, target)
        if installed is not None and installed in self.config.files:
            return self.config.files[installed].content
        if installed is not None and target:
            return None
        return self.read_source(path)

    def _write(self, path: str, data: bytes, target: str, *, append: bool = False, mode: int | None = None) -> None:
        installed = self._installed(path, target)
        if installed is None:
            return
        old = self.config.files.get(installed)
        content = (old.content if old and append else b"") + data
        self.config.files[installed] = FileSpec(content, mode if mode is not None else (old.mode if old else 0o644))

    def _chmod(self, mode: str, path: str, target: str) -> None:
        installed = self._installed(path, target)
        if installed is None or not re.fullmatch(r"[0-7]{3,4}", mode):
            return
        if installed in self.config.files:
            self.config.files[installed] = FileSpec(self.config.files[installed].content, int(mode, 8))
        else:
            self.config.dirs[installed] = int(mode, 8)

    # -- parsing
    def run(self, text: str) -> None:
        lines = text.splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            while index < len(lines) and (line.endswith("\\") or _open_quote(line)):
                line = (line[:-1] + " " if line.endswith("\\") else line + "\n") + lines[index]
                index += 1
            heredoc = None
            match = re.search(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", line)
            if match:
                body = []
                while index < len(lines) and (lines[index].lstrip("\t") if match.group(1) else lines[index]) != (
                    match.group(3)
                ):
                    body.append(lines[index].lstrip("\t") if match.group(1) else lines[index])
                    index += 1
                index += 1
                heredoc = ("\n".join(body) + "\n").encode()
                line = line[: match.start()] + line[match.end() :]
            self.run_line(line, self.target, heredoc)

    def run_line(self, line: str, target: str, stdin: bytes | None = None) -> None:
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError:
            self.config.ignored_commands.append(line.strip())
            return
        command: list[str] = []
        for token in [*tokens, ";"]:
            if token in (";", "&&", "||", "|", "&"):
                if command:
                    self.run_command(command, target, stdin)
                command = []
            else:
                command.append(token)

    def run_command(self, words: list[str], target: str, stdin: bytes | None) -> None:  # noqa: PLR0911
        redirect, append = None, False
        for op in (">>", ">"):
            if op in words:
                at = words.index(op)
                if at + 1 < len(words):
                    redirect, append = words[at + 1], op == ">>"
                    words = words[:at] + words[at + 2 :]
                break
        if not words:
            return
        name, args = words[0], words[1:]
        if name == "in-target":
            self.run_command(args, "", stdin)
            return
        if name == "curtin" and args[:1] == ["in-target"]:
            rest = args[args.index("--") + 1 :] if "--" in args else args[1:]
            self.run_command(rest, "", stdin)
            return
        if name in ("sh", "bash", "/bin/sh", "/bin/bash") and args[:1] == ["-c"] and len(args) > 1:
            saved, self.target = self.target, target
            self.run(args[1])
            self.target = saved
            return
        if name in ("sh", "bash", "/bin/sh", "/bin/bash", ".") and args and not args[0].startswith("-"):
            # A script file the configuration wrote (or brought on the ISO/initrd), run the same way.
            script = self._read(args[0], target)
            if script is None:
                self.config.ignored_commands.append(" ".join(words) + "  # script not found")
                return
            saved, self.target = self.target, target
            self.run(script.decode(errors="replace"))
            self.target = saved
            return
        if name == "cat" and redirect:
            data = stdin if not args else b"".join(self._read(a, target) or b"" for a in args)
            self._write(redirect, data or b"", target, append=append)
        elif name == "echo" and redirect:
            newline = b"" if args[:1] == ["-n"] else b"\n"
            text = " ".join(a for a in args if a not in ("-n", "-e"))
            self._write(redirect, text.encode() + newline, target, append=append)
        elif name == "printf" and redirect and args:
            self._write(redirect, _printf(args[0], args[1:]).encode(), target, append=append)
        elif name == "cp" and len([a for a in args if not a.startswith("-")]) == 2:
            src, dst = [a for a in args if not a.startswith("-")]
            data = self._read(src, target)
            if data is None:
                self.config.ignored_commands.append(" ".join(words) + "  # source not found")
                return
            if dst.endswith("/"):
                dst += posixpath.basename(src)
            self._write(dst, data, target)
        elif name == "install":
            self._install(args, target)
        elif name == "mkdir":
            mode = args[args.index("-m") + 1] if "-m" in args else None
            for path in (a for a in args if a.startswith("/")):
                installed = self._installed(path, target)
                if installed is not None:
                    self.config.dirs.setdefault(installed, int(mode, 8) if mode else 0o755)
        elif name == "chmod" and len(args) >= 2:
            for path in args[1:]:
                self._chmod(args[0], path, target)
        elif name == "rm":
            for path in (a for a in args if not a.startswith("-")):
                self._remove(path, target, recursive=any(a.startswith("-") and "r" in a.lower() for a in args))
        elif name in ("chown", "restorecon", "true", ":", "chcon", "sync"):
            return
        else:
            self.config.ignored_commands.append(" ".join(words))

    def _remove(self, path: str, target: str, *, recursive: bool) -> None:
        """``rm``: the file (with ``-r``, everything under the directory too) is not in the installed system."""
        installed = self._installed(path, target)
        if installed is None:
            return
        self.config.files.pop(installed, None)
        if recursive:
            inside = installed.rstrip("/") + "/"
            for gone in [f for f in self.config.files if f.startswith(inside)]:
                del self.config.files[gone]
            for gone in [d for d in self.config.dirs if d == installed or d.startswith(inside)]:
                del self.config.dirs[gone]

    def _install(self, args: list[str], target: str) -> None:
        mode = int(args[args.index("-m") + 1], 8) if "-m" in args else 0o755
        paths = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] != "-m")]
        if "-d" in args:
            for path in paths:
                installed = self._installed(path, target)
                if installed is not None:
                    self.config.dirs[installed] = mode
            return
        if len(paths) == 2:
            data = self._read(paths[0], target)
            if data is not None:
                self._write(paths[1], data, target, mode=mode)


def _norm(path: str) -> str:
    return "/" + posixpath.normpath("/" + path).lstrip("/")


def _open_quote(line: str) -> bool:
    """Whether ``line`` ends inside a quoted string (the shell would read on)."""
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return True
    return False


def _printf(fmt: str, args: list[str]) -> str:
    fmt = fmt.encode().decode("unicode_escape")
    if "%s" not in fmt:
        return fmt
    out, queue = [], list(args) or [""]
    while queue:
        parts = fmt.split("%s")
        rendered = parts[0]
        for part in parts[1:]:
            rendered += (queue.pop(0) if queue else "") + part
        out.append(rendered)
    return "".join(out)


# ------------------------------------------------------------------------------- kickstart
def _source_path(iso: IsoImage, location: str) -> tuple[str | None, str | None]:
    """``(path on the ISO, error)`` for an Anaconda ``inst.ks=`` location (Anaconda boot options)."""
    if location.startswith(("http://", "https://", "ftp://", "nfs:")):
        return None, f"inst.ks={location} needs the network while installing; the lab host has none"
    if location.startswith("cdrom:"):
        return location[len("cdrom:") :] or "/ks.cfg", None
    if location.startswith("hd:"):
        device, _sep, path = location[3:].rpartition(":")
        if device.startswith("LABEL="):
            label = device[len("LABEL=") :].replace("\\x20", " ")
            if label != iso.volume_id:
                return None, (
                    f"inst.ks names a device labelled {label!r} but the ISO's volume id is {iso.volume_id!r}: "
                    "dracut waits for it, then drops to an emergency shell"
                )
        return path or "/ks.cfg", None
    if location.startswith("file:"):
        return None, "inst.ks=file: reads from the initrd; the lab reads kickstarts on the ISO only"
    return None, f"inst.ks={location!r} is not a location Anaconda understands"


def read_kickstart(iso: IsoImage, entry: BootEntry) -> InstallConfig:
    location = entry.arg("inst.ks", "ks") or ""
    config = InstallConfig("kickstart", entry, source=f"inst.ks={location}", final_action="halt")
    path, error = _source_path(iso, location)
    if error or path is None:
        config.error = error
        return config
    data = iso.read(path)
    if data is None:
        config.error = f"inst.ks={location}: {path} is not on the ISO; Anaconda stops with a kickstart error"
        return config
    parse_kickstart(data.decode("utf-8", "replace"), config, iso.read)
    return config


def parse_kickstart(text: str, config: InstallConfig, read_iso: Callable[[str], bytes | None]) -> None:
    """Pykickstart syntax (commands, ``%packages``, ``%post [--nochroot]`` ... ``%end``)."""
    section: str | None = None
    section_args: list[str] = []
    body: list[str] = []
    partitioned = False
    for line in text.splitlines():
        stripped = line.strip()
        if section is not None:
            if stripped == "%end":
                _kickstart_section(config, section, section_args, "\n".join(body), read_iso)
                section, body = None, []
            else:
                body.append(line)
            continue
        if not stripped or stripped.startswith("#"):
            continue
        words = _grub_words(stripped)
        if not words:
            continue
        if words[0].startswith("%"):
            if words[0] == "%include":
                config.ignored_commands.append(stripped)
                continue
            section, section_args = words[0], words[1:]
            continue
        name, options = words[0], _ks_options(words[1:])
        if name == "network":
            if options.get("hostname"):
                config.hostname = options["hostname"]
            if "device" in options or "bootproto" in options or "ip" in options:
                config.networks.append(_ks_network(options))
        elif name == "sshkey":
            positional = [w for w in words[1:] if not w.startswith("--")]
            user = options.get("username", "")
            if positional:
                config.authorized_keys.setdefault(user, []).append(positional[-1])
        elif name == "user" and options.get("name"):
            config.users.append(options["name"])
        elif name in ("poweroff", "shutdown"):
            config.final_action = "poweroff"
        elif name in ("reboot", "halt"):
            config.final_action = name
        elif name in ("autopart", "part", "partition", "logvol", "reqpart", "mount"):
            partitioned = partitioned or name != "reqpart"
            if name in ("part", "partition") and (options.get("ondisk") or options.get("ondrive")):
                config.root_disk = config.root_disk or options.get("ondisk") or options.get("ondrive")
        elif name == "ignoredisk" and options.get("only-use"):
            config.root_disk = options["only-use"].split(",")[0]
        elif name == "clearpart" and options.get("drives"):
            config.root_disk = config.root_disk or options["drives"].split(",")[0]
    if section is not None:
        config.error = f"{section} has no %end: Anaconda stops with a kickstart syntax error"
    for user in config.authorized_keys:
        if user not in config.users:
            config.error = config.error or f"sshkey --username={user}: no such user; Anaconda stops with an error"
    if not partitioned and config.error is None:
        config.prompt = (
            "the kickstart has no autopart/part: Anaconda's Installation Destination spoke is incomplete and it "
            "waits for input"
        )


def _ks_options(words: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for word in words:
        if word.startswith("--"):
            key, _sep, value = word[2:].partition("=")
            options[key] = value or "true"
    return options


def _ks_network(options: dict[str, str]) -> Network:
    method = "static" if options.get("bootproto") == "static" else "dhcp"
    prefix = None
    if options.get("netmask"):
        try:
            prefix = ipaddress.IPv4Network(f"0.0.0.0/{options['netmask']}").prefixlen
        except ValueError:
            prefix = -1
    nameservers = tuple(n for n in options.get("nameserver", "").split(",") if n)
    return Network(
        options.get("device", "link"), method, options.get("ip"), prefix, options.get("gateway"), nameservers
    )


def _kickstart_section(
    config: InstallConfig, section: str, args: list[str], body: str, read_iso: Callable[[str], bytes | None]
) -> None:
    if section == "%packages":
        if any(line.strip() == "-openssh-server" for line in body.splitlines()):
            config.ssh_server = False
        return
    if section != "%post":
        return
    interpreter = next((a.split("=", 1)[1] for a in args if a.startswith("--interpreter=")), "/bin/sh")
    if posixpath.basename(interpreter) not in ("sh", "bash"):
        config.ignored_commands.append(f"%post --interpreter={interpreter}")
        return
    nochroot = "--nochroot" in args

    def read_source(path: str) -> bytes | None:
        repo = "/run/install/repo/"  # where Anaconda mounts the install media (nochroot only)
        if nochroot and path.startswith(repo):
            return read_iso("/" + path[len(repo) :])
        return None

    _Script(config, "/mnt/sysimage" if nochroot else "", read_source).run(body)
    _collect_authorized_keys(config)


def _collect_authorized_keys(config: InstallConfig) -> None:
    """Keys written into ``~/.ssh/authorized_keys`` by scripts count as the configuration's keys."""
    for path, spec in config.files.items():
        match = re.fullmatch(r"/(?:root|home/([^/]+))/\.ssh/authorized_keys", path)
        if match:
            user = match.group(1) or "root"
            keys = [k.strip() for k in spec.content.decode("utf-8", "replace").splitlines() if k.strip()]
            known = config.authorized_keys.setdefault(user, [])
            known.extend(k for k in keys if k not in known and not k.startswith("#"))


# --------------------------------------------------------------------------------- preseed
def _initrd_files(iso: IsoImage, entry: BootEntry) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for initrd in entry.initrds:
        data = iso.read(initrd)
        if data is not None:
            files.update(read_initrd(data))
    return files


def read_initrd(data: bytes) -> dict[str, bytes]:
    """The regular files of an initramfs: concatenated cpio ``newc`` archives, each maybe gzip or xz."""
    files: dict[str, bytes] = {}
    offset = 0
    while offset < len(data):
        chunk = data[offset:]
        if chunk[:6] in CPIO_MAGICS:
            files_in, used = _read_cpio(chunk)
            files.update(files_in)
            offset += used
        elif chunk[:2] == GZIP_MAGIC:
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            inner = decompressor.decompress(chunk)
            files.update(read_initrd(inner))
            offset += len(chunk) - len(decompressor.unused_data)
        elif chunk[:6] == XZ_MAGIC:
            decompressor_xz = lzma.LZMADecompressor()
            inner = decompressor_xz.decompress(chunk)
            files.update(read_initrd(inner))
            offset += len(chunk) - len(decompressor_xz.unused_data)
        elif chunk[:1] == b"\x00":
            offset += 1  # padding between archives
        else:
            break  # a compression stdlib cannot read (zstd, lz4): the rest is opaque here
    return files


def _read_cpio(data: bytes) -> tuple[dict[str, bytes], int]:
    files: dict[str, bytes] = {}
    offset = 0
    while offset + 110 <= len(data) and data[offset : offset + 6] in CPIO_MAGICS:
        header = data[offset : offset + 110]
        mode = int(header[14:22], 16)
        size = int(header[54:62], 16)
        namesize = int(header[94:102], 16)
        name_start = offset + 110
        name = data[name_start : name_start + namesize - 1].decode("utf-8", "replace")
        body_start = (name_start + namesize + 3) & ~3
        body = data[body_start : body_start + size]
        offset = (body_start + size + 3) & ~3
        if name == CPIO_TRAILER:
            break
        if mode & 0o170000 == 0o100000:  # a regular file
            files[posixpath.normpath(name.removeprefix("./")).lstrip("/")] = body
    return files, offset


def parse_preseed(text: str) -> dict[str, tuple[str, str]]:
    """``{question: (type, value)}`` from debconf preseed lines (``owner question type value``)."""
    answers: dict[str, tuple[str, str]] = {}
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    for line in logical:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = stripped.split(None, 3)
        if len(parts) >= 3:
            answers[parts[1]] = (parts[2], parts[3] if len(parts) == 4 else "")
    return answers


def read_preseed(entry: BootEntry, initrd: dict[str, bytes], iso: IsoImage) -> InstallConfig:
    config = InstallConfig("preseed", entry, source="preseed.cfg in the initrd")
    data = initrd.get("preseed.cfg")
    if data is None:
        config.prompt = "no preseed.cfg at the root of the initrd: d-i asks its questions interactively"
        return config
    answers = parse_preseed(data.decode("utf-8", "replace"))

    def value(question: str) -> str:
        return answers.get(question, ("", ""))[1].strip()

    def true(question: str) -> bool:
        return value(question).lower() == "true"

    auto = entry.arg("auto", "auto-install/enable") == "true"
    priority = entry.arg("priority", "debconf/priority")
    if not auto or priority != "critical":
        config.prompt = (
            "the kernel command line lacks auto=true priority=critical: d-i shows every question above "
            "critical priority that the preseed does not answer, and waits"
        )
    for question in ("partman/confirm", "partman/confirm_nooverwrite"):
        if not true(question) and config.prompt is None:
            config.prompt = f"the preseed does not answer {question}: partman asks to confirm writing the disk"
    config.hostname = value("netcfg/hostname") or value("netcfg/get_hostname") or None
    device = value("netcfg/choose_interface") or "auto"
    bootif = entry.arg("BOOTIF")
    if device == "auto" and bootif:
        device = "bootif"
    if true("netcfg/disable_autoconfig"):
        address = value("netcfg/get_ipaddress") or None
        prefix = None
        netmask = value("netcfg/get_netmask")
        if netmask:
            try:
                prefix = ipaddress.IPv4Network(f"0.0.0.0/{netmask}").prefixlen
            except ValueError:
                prefix = -1
        nameservers = tuple(value("netcfg/get_nameservers").split())
        config.networks.append(
            Network(device, "static", address, prefix, value("netcfg/get_gateway") or None, nameservers)
        )
    else:
        config.networks.append(Network(device, "dhcp"))
    if value("passwd/root-login").lower() == "false" or true("passwd/make-user"):
        user = value("passwd/username")
        if user:
            config.users.append(user)
    config.root_disk = value("partman-auto/disk").split()[0] if value("partman-auto/disk") else None
    packages = value("pkgsel/include").split()
    tasks = value("tasksel/first").replace(",", " ").split()
    config.ssh_server = "openssh-server" in packages or "ssh-server" in tasks
    if true("debian-installer/exit/poweroff"):
        config.final_action = "poweroff"
    elif true("debian-installer/exit/halt"):
        config.final_action = "halt"

    def read_source(path: str) -> bytes | None:
        if path.startswith("/cdrom/"):
            return iso.read(path[len("/cdrom") :])
        return initrd.get(path.lstrip("/"))

    late = value("preseed/late_command")
    if late:
        _Script(config, "/target", read_source).run(late)
        _collect_authorized_keys(config)
    return config


# ----------------------------------------------------------------------------- autoinstall
def _nocloud_dir(entry: BootEntry) -> str | None:
    """``/cdrom/nocloud/`` -> ``/nocloud/`` from ``ds=nocloud;s=...`` (or ``ds=nocloud;seedfrom=...``)."""
    ds = entry.arg("ds")
    if ds is None or not ds.startswith("nocloud"):
        return None
    for part in ds.split(";")[1:]:
        key, _sep, value = part.partition("=")
        if key in ("s", "seedfrom") and value.startswith("/cdrom/"):
            return value[len("/cdrom") :]
        if key in ("s", "seedfrom"):
            return None
    return None


def read_autoinstall(iso: IsoImage, entry: BootEntry) -> InstallConfig:  # noqa: PLR0911
    config = InstallConfig("autoinstall", entry, source=f"ds={entry.arg('ds')}")
    seed = _nocloud_dir(entry)
    if seed is None:
        config.prompt = (
            "the kernel command line names no ds=nocloud;s=/cdrom/<dir>/ seed on the ISO: subiquity finds no "
            "autoinstall configuration and starts interactively"
        )
        return config
    user_data = iso.read(posixpath.join(seed, "user-data"))
    meta_data = iso.read(posixpath.join(seed, "meta-data"))
    config.source = f"{seed}user-data on the ISO"
    if user_data is None or meta_data is None:
        missing = "user-data" if user_data is None else "meta-data"
        config.prompt = f"{seed}{missing} is not on the ISO: NoCloud finds no seed and subiquity starts interactively"
        return config
    text = user_data.decode("utf-8", "replace")
    if not text.startswith("#cloud-config"):
        config.prompt = f"{seed}user-data does not start with #cloud-config: subiquity starts interactively"
        return config
    try:
        document = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        config.error = f"{seed}user-data is not valid YAML ({exc}); subiquity stops with an error"
        return config
    auto = document.get("autoinstall") if isinstance(document, dict) else None
    if not isinstance(auto, dict):
        config.prompt = f"{seed}user-data has no autoinstall section: subiquity starts interactively"
        return config
    if auto.get("version") != 1:
        config.error = f"autoinstall version {auto.get('version')!r}: subiquity accepts version 1 only"
        return config
    if not entry.flag("autoinstall"):
        config.prompt = (
            "'autoinstall' is not on the kernel command line: subiquity asks 'Continue with autoinstall?' and waits"
        )
    if auto.get("interactive-sections"):
        config.prompt = f"interactive-sections {auto['interactive-sections']}: subiquity stops on those screens"
    identity = auto.get("identity") or {}
    config.hostname = identity.get("hostname")
    user = identity.get("username")
    if user:
        config.users.append(str(user))
    ssh = auto.get("ssh") or {}
    config.ssh_server = bool(ssh.get("install-server", False))
    if ssh.get("authorized-keys") and user:
        config.authorized_keys.setdefault(str(user), []).extend(str(k) for k in ssh["authorized-keys"])
    config.networks.extend(_netplan_networks(auto.get("network")))
    storage = auto.get("storage") or {}
    match = (storage.get("layout") or {}).get("match") or {}
    config.root_disk = match.get("serial") or match.get("path") or None
    config.final_action = "poweroff" if auto.get("shutdown") == "poweroff" else "reboot"
    _cloud_init_user_data(config, auto.get("user-data") or {})
    commands = auto.get("late-commands") or []
    script = _Script(
        config,
        "/target",
        lambda path: iso.read(path[len("/cdrom") :]) if path.startswith("/cdrom/") else None,
    )
    for command in commands:
        script.run(str(command))
    _collect_authorized_keys(config)
    return config


def _netplan_networks(network: Any) -> list[Network]:
    """Netplan v2 ``ethernets`` (``match: {macaddress}`` or the interface name) -> networks."""
    if not isinstance(network, dict):
        return []
    if isinstance(network.get("network"), dict):
        network = network["network"]
    found = []
    for name, settings in (network.get("ethernets") or {}).items():
        eth = settings or {}
        device = str((eth.get("match") or {}).get("macaddress") or name)
        if eth.get("dhcp4"):
            found.append(Network(device, "dhcp"))
            continue
        addresses = [str(a) for a in eth.get("addresses") or []]
        address, prefix = None, None
        if addresses:
            address, _sep, bits = addresses[0].partition("/")
            prefix = int(bits) if bits.isdigit() else -1
        gateway = eth.get("gateway4")
        for route in eth.get("routes") or []:
            if str(route.get("to")) in ("default", "0.0.0.0/0"):
                gateway = route.get("via")
        nameservers = tuple(str(n) for n in (eth.get("nameservers") or {}).get("addresses") or [])
        found.append(Network(device, "static" if address else "dhcp", address, prefix, gateway, nameservers))
    return found


def _cloud_init_user_data(config: InstallConfig, user_data: dict[str, Any]) -> None:
    """cloud-init for the installed system: ``ssh_keys`` (cc_ssh) host keys, ``write_files``, ``users``."""
    for key, value in (user_data.get("ssh_keys") or {}).items():
        match = re.fullmatch(r"(rsa|ecdsa|ed25519)_(private|public)", str(key))
        if match:
            path = f"{SSH_HOST_KEY_DIR}ssh_host_{match.group(1)}_key" + (".pub" if match.group(2) == "public" else "")
            config.files[path] = FileSpec(str(value).encode(), 0o600 if match.group(2) == "private" else 0o644)
    for item in user_data.get("write_files") or []:
        content = str(item.get("content", ""))
        data = (
            gzip.decompress(_b64(content))
            if item.get("encoding") in ("gz+b64", "gzip+base64")
            else (_b64(content) if item.get("encoding") in ("b64", "base64") else content.encode())
        )
        mode = int(str(item.get("permissions", "0644")), 8)
        config.files[_norm(str(item["path"]))] = FileSpec(data, mode)
    for user in user_data.get("users") or []:
        if isinstance(user, dict) and user.get("name"):
            name = str(user["name"])
            if name not in config.users:
                config.users.append(name)
            config.authorized_keys.setdefault(name, []).extend(str(k) for k in user.get("ssh_authorized_keys") or [])


def _b64(text: str) -> bytes:
    return base64.b64decode(text)
