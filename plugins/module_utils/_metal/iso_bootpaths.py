# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find an installer ISO's boot configurations from its El Torito entries, and edit them to start the install.

Why: installer ISOs differ in where their boot loaders read their menus (EL 10 and Ubuntu 24.04 boot BIOS
through GRUB's eltorito.img, Debian through ISOLINUX; UEFI GRUB reads ``(cd0)/EFI/BOOT/grub.cfg`` on EL and
is pointed at ``/boot/grub/grub.cfg`` by a stub or an embedded config on Debian and Ubuntu), and the paths
change between releases. So the paths are derived from the El Torito boot images and the files the loaders
look for, and every one found is edited: its installer entries get the unattended kernel arguments (and,
for Debian, the preseed initrd), the first of them becomes the default, and the menu timeout becomes zero,
so the machine installs with nobody at the console.

Everything here is pure text processing; ``iso_image`` reads and writes the ISO and the EFI image.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

EDIT_MARKER = "# Edited by metalplane.inference boot_iso: start the unattended install with no prompt."
# Kernel arguments that mark a rescue or check entry: never turned into an install entry.
SKIP_ARGS = ("inst.rescue", "rescue/enable=true", "rescue/enable")
# ISOLINUX looks for its configuration in its own directory first, then in these (syslinux doc/isolinux.txt).
ISOLINUX_SEARCH = (
    "/boot/isolinux/isolinux.cfg",
    "/isolinux/isolinux.cfg",
    "/boot/syslinux/syslinux.cfg",
    "/syslinux/syslinux.cfg",
)
# Where GRUB built for BIOS looks when its image is not under <prefix>/i386-pc/ (lorax: /boot/grub2).
GRUB_BIOS_PREFIXES = ("/boot/grub2", "/boot/grub")
# Where GRUB booted from the CD in UEFI mode looks: $cmdpath is (cd0)/EFI/BOOT; Debian and Ubuntu set prefix
# to /boot/grub (their efi.img stub or the signed GRUB's embedded config).
GRUB_UEFI_CONFIGS = ("/EFI/BOOT/grub.cfg", "/boot/grub/grub.cfg")
MAX_CHAIN = 4  # source/configfile hops followed from a stub to the menu


class BootPathError(MetalplaneError):
    """The ISO's boot configuration could not be found or has no installer entry to edit."""

    kind = "boot_path"


@dataclass(frozen=True)
class KernelEdit:
    """What every installer entry gets: arguments added or removed, and an extra initrd."""

    add_args: tuple[str, ...] = ()
    remove_args: tuple[str, ...] = ()
    extra_initrd: str | None = None


@dataclass
class EditResult:
    text: str
    entries: list[str] = field(default_factory=list)  # titles (GRUB) or labels (ISOLINUX) edited
    default: str = ""


def _split_separator(args: list[str]) -> tuple[list[str], list[str]]:
    """Kernel arguments before and from ``---`` (Debian/Ubuntu copy what follows it to the installed system)."""
    if "---" in args:
        index = args.index("---")
        return args[:index], args[index:]
    return args, []


def edit_args(args: list[str], edit: KernelEdit, *, escape: Callable[[str], str] = lambda a: a) -> list[str]:
    """``args`` with ``edit.remove_args`` dropped and ``edit.add_args`` added once, before any ``---``."""
    head, tail = _split_separator(args)
    removed = {escape(a) for a in edit.remove_args}
    # An added key=value replaces the entry's own value for that key (priority=low -> priority=critical).
    replaced = {a.split("=", 1)[0] for a in edit.add_args if "=" in a}
    head = [a for a in head if a not in removed and a.split("=", 1)[0] not in removed | replaced]
    for arg in (escape(a) for a in edit.add_args):
        if arg not in head:
            head.append(arg)
    return head + tail


def _is_skipped(args: list[str]) -> bool:
    return any(a == marker or a.startswith(marker + "=") for a in args for marker in SKIP_ARGS)


# ------------------------------------------------------------------------------------------------
# GRUB

_GRUB_OPEN = re.compile(r"^\s*(\S+).*\{\s*$")  # menuentry, submenu, function: any block
_GRUB_CLOSE = re.compile(r"^\s*\}\s*$")
_GRUB_KERNEL = re.compile(r"^(\s*)(linux|linuxefi|linux16)(\s+)(\S+)(.*)$")
_GRUB_INITRD = re.compile(r"^(\s*)(initrd|initrdefi|initrd16)(\s+)(.*?)\s*$")
_GRUB_GLOBAL = re.compile(r"^\s*set\s+(default|timeout|timeout_style)=")
_GRUB_TITLE = re.compile(r"""^\s*(?:menuentry|submenu)\s+(?:--\S+\s+)*(?:'([^']*)'|"([^"]*)"|(\S+))""")


def grub_escape(arg: str) -> str:
    """GRUB's shell-like parser ends a command at ``;``: ``ds=nocloud;s=...`` must be ``ds=nocloud\\;s=...``."""
    return arg.replace(";", "\\;")


def _title(line: str) -> str:
    match = _GRUB_TITLE.match(line)
    return next((g for g in match.groups() if g is not None), "") if match else ""


def has_grub_menu(text: str) -> bool:
    """True when the file has a menu entry that boots a kernel with an initrd (an installer entry)."""
    return bool(_grub_entries(text.splitlines()))


def _grub_entries(lines: list[str]) -> list[tuple[int, int, str, str]]:
    """(first line, closing line, title, default id) of every menuentry with a kernel and an initrd."""
    found: list[tuple[int, int, str, str]] = []
    stack: list[tuple[int, str, str, int]] = []  # (line, kind, id, children seen)
    top_index = 0
    for number, line in enumerate(lines):
        opened = _GRUB_OPEN.match(line)
        if opened:
            kind, entry_id = opened.group(1), ""
            menus = [frame for frame in stack if frame[1] == "submenu"]
            if kind in {"menuentry", "submenu"}:
                if menus:  # GRUB numbers entries per menu level: "<submenu>><entry>"
                    parent = menus[-1]
                    entry_id = f"{parent[2]}>{parent[3]}"
                    stack[stack.index(parent)] = (parent[0], parent[1], parent[2], parent[3] + 1)
                else:
                    entry_id = str(top_index)
                    top_index += 1
            stack.append((number, kind, entry_id, 0))
            continue
        if _GRUB_CLOSE.match(line) and stack:
            start, kind, entry_id, _unused = stack.pop()
            if kind == "menuentry":
                body = lines[start + 1 : number]
                kernels = [m for m in (_GRUB_KERNEL.match(b) for b in body) if m]
                if (
                    kernels
                    and any(_GRUB_INITRD.match(b) for b in body)
                    and not _is_skipped(kernels[0].group(5).split())
                ):
                    found.append((start, number, _title(lines[start]), entry_id))
    return found


def edit_grub_cfg(text: str, edit: KernelEdit) -> EditResult:
    """Edit a GRUB menu: every installer entry gets ``edit``; the first becomes the default, timeout 0."""
    lines = text.splitlines()
    entries = _grub_entries(lines)
    if not entries:
        raise BootPathError("no GRUB menu entry boots an installer kernel with an initrd")
    for start, end, _unused, _unused2 in entries:
        for number in range(start + 1, end):
            kernel = _GRUB_KERNEL.match(lines[number])
            if kernel:
                args = edit_args(kernel.group(5).split(), edit, escape=grub_escape)
                lines[number] = f"{kernel.group(1)}{kernel.group(2)}{kernel.group(3)}{kernel.group(4)} {' '.join(args)}"
                continue
            initrd = _GRUB_INITRD.match(lines[number])
            if initrd and edit.extra_initrd and edit.extra_initrd not in initrd.group(4).split():
                lines[number] = (
                    f"{initrd.group(1)}{initrd.group(2)}{initrd.group(3)}{initrd.group(4)} {edit.extra_initrd}"
                )
    # Drop the menu's own default and timeout at the top level (GRUB runs them in order; a later one wins).
    depth = 0
    kept: list[str] = []
    for line in lines:
        if _GRUB_OPEN.match(line):
            depth += 1
        elif _GRUB_CLOSE.match(line) and depth:
            depth -= 1
        elif depth == 0 and _GRUB_GLOBAL.match(line):
            continue
        kept.append(line)
    default = entries[0][3]
    header = [EDIT_MARKER, f'set default="{default}"', "set timeout_style=hidden", "set timeout=0", ""]
    return EditResult("\n".join(header + kept) + "\n", [e[2] for e in entries], default)


_GRUB_CHAIN = re.compile(r"^\s*(source|configfile)\s+(\S+)")
_GRUB_PREFIX = re.compile(r"^\s*set\s+prefix=(\S+)")


def grub_chain_target(text: str) -> str | None:
    """The ISO path a stub configuration hands over to (``source``/``configfile``), with ``$prefix`` resolved."""
    prefix = ""
    target: str | None = None
    for line in text.splitlines():
        set_prefix = _GRUB_PREFIX.match(line)
        if set_prefix:
            prefix = re.sub(r"^\([^)]*\)", "", set_prefix.group(1).strip("'\""))
        chain = _GRUB_CHAIN.match(line)
        if chain:
            path = chain.group(2).strip("'\"")
            path = path.replace("${prefix}", prefix).replace("$prefix", prefix)
            target = re.sub(r"^\([^)]*\)", "", path)
    return target if target and target.startswith("/") else None


# ------------------------------------------------------------------------------------------------
# ISOLINUX

_SYS_DIRECTIVE = re.compile(r"^(\s*)(\S+)(\s*)(.*)$")


def isolinux_includes(text: str) -> list[str]:
    """Files named by ``include`` (and ``menu include``) lines, in order, as written."""
    found = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].lower() == "include":
            found.append(words[1])
        elif len(words) >= 3 and words[0].lower() == "menu" and words[1].lower() == "include":
            found.append(words[2])
    return found


def edit_isolinux(files: dict[str, str], top: str, edit: KernelEdit) -> tuple[dict[str, str], EditResult]:
    """Edit every label of ``files`` (the top configuration and what it includes) that boots an installer.

    Returns the edited files and, for the top file, the labels edited and the default chosen. The top file
    gets ``default <first edited label>``, ``prompt 0`` and ``timeout 1`` at its end (the last directive wins,
    and it comes after the includes); ``ui`` and ``menu default`` lines are dropped everywhere, since a menu
    would otherwise pick its own default.
    """
    edited_labels: list[str] = []
    out: dict[str, str] = {}
    for path, text in files.items():
        lines = text.splitlines()
        labels = _isolinux_labels(lines)
        for label, numbers in labels:
            if _edit_isolinux_label(lines, numbers, edit):
                edited_labels.append(label)
        kept = []
        for line in lines:
            words = line.split()
            lowered = [w.lower() for w in words[:2]]
            if lowered[:1] == ["ui"] or lowered == ["menu", "default"]:
                continue
            if path == top and lowered[:1] and lowered[0] in {"default", "prompt", "timeout", "ontimeout"}:
                continue
            kept.append(line)
        out[path] = "\n".join(kept) + "\n"
    if not edited_labels:
        raise BootPathError("no ISOLINUX label boots an installer kernel with an initrd")
    default = edited_labels[0]
    out[top] = out[top] + f"{EDIT_MARKER}\ndefault {default}\nprompt 0\ntimeout 1\n"
    return out, EditResult(out[top], edited_labels, default)


def _isolinux_labels(lines: list[str]) -> list[tuple[str, list[int]]]:
    labels: list[tuple[str, list[int]]] = []
    for number, line in enumerate(lines):
        words = line.split()
        if not words:
            continue
        if words[0].lower() == "label" and len(words) > 1:
            labels.append((words[1], []))
        elif labels:
            labels[-1][1].append(number)
    return labels


def _edit_isolinux_label(lines: list[str], numbers: list[int], edit: KernelEdit) -> bool:
    kernel = append = initrd = None
    for number in numbers:
        word = lines[number].split()[0].lower()
        if word in {"kernel", "linux"}:
            kernel = number
        elif word == "append":
            append = number
        elif word == "initrd":
            initrd = number
    if kernel is None or append is None:
        return False
    match = _SYS_DIRECTIVE.match(lines[append])
    if match is None:  # the scan above found this line by the same pattern
        raise AssertionError(f"isolinux line {append} is no longer an append directive")
    args = match.group(4).split()
    has_initrd = initrd is not None or any(a.startswith("initrd=") for a in args)
    if not has_initrd or _is_skipped(args):
        return False
    if edit.extra_initrd:
        if initrd is not None:
            parts = lines[initrd].split(None, 1)
            if edit.extra_initrd not in parts[1].split(","):
                lines[initrd] = f"{lines[initrd].rstrip()},{edit.extra_initrd}"
        else:
            args = [
                f"{a},{edit.extra_initrd}" if a.startswith("initrd=") and edit.extra_initrd not in a else a
                for a in args
            ]
    args = edit_args(args, edit)
    lines[append] = f"{match.group(1)}{match.group(2)} {' '.join(args)}"
    return True


# ------------------------------------------------------------------------------------------------
# Discovery


@dataclass(frozen=True)
class BootPath:
    """One way the ISO boots: firmware, loader, and the configuration file that loader reads.

    ``where`` is ``iso`` (the ISO9660 tree) or ``efi_image`` (inside the El Torito EFI FAT image);
    ``via`` lists the stub configurations that hand over to ``config`` (Debian's efi.img ``grub.cfg``).
    """

    firmware: str
    loader: str
    where: str
    config: str
    via: tuple[str, ...] = ()

    def to_result(self) -> dict[str, object]:
        return {
            "firmware": self.firmware,
            "loader": self.loader,
            "where": self.where,
            "config": self.config,
            "via": list(self.via),
        }


def bios_loader(image_path: str | None, image: bytes) -> str:
    """``isolinux`` or ``grub``, from the El Torito BIOS image's name and content."""
    name = posixpath.basename(image_path or "").lower()
    if name == "isolinux.bin" or b"ISOLINUX" in image:
        return "isolinux"
    if name == "eltorito.img" or b"GRUB" in image:
        return "grub"
    raise BootPathError(
        f"the El Torito BIOS image {image_path or '(not in the ISO9660 tree)'} is neither ISOLINUX nor GRUB; "
        "only those two are supported"
    )


def bios_config(loader: str, image_path: str | None, exists: Callable[[str], bool]) -> str:
    """The configuration the BIOS loader reads first."""
    if loader == "isolinux":
        own = posixpath.join(posixpath.dirname(image_path or "/"), "isolinux.cfg")
        candidates: tuple[str, ...] = (own, *ISOLINUX_SEARCH)
    else:
        directory = posixpath.dirname(image_path or "")
        prefixes = (posixpath.dirname(directory),) if posixpath.basename(directory) == "i386-pc" else GRUB_BIOS_PREFIXES
        candidates = tuple(posixpath.join(p, "grub.cfg") for p in prefixes)
    for candidate in candidates:
        if exists(candidate):
            return candidate
    raise BootPathError(f"the {loader} BIOS boot image has no configuration at {', '.join(candidates)}")


def follow_grub_chain(
    path: str, read: Callable[[str], str | None], via: tuple[str, ...] = ()
) -> tuple[str, tuple[str, ...]]:
    """From ``path`` (an ISO file), follow stub configurations to the one with the menu."""
    current, hops = path, via
    for _unused in range(MAX_CHAIN):
        text = read(current)
        if text is None:
            raise BootPathError(f"{' -> '.join((*hops, current))}: {current} is not on the ISO")
        if has_grub_menu(text):
            return current, hops
        target = grub_chain_target(text)
        if target is None:
            raise BootPathError(f"{current} has no installer menu entry and hands over to no other configuration")
        hops, current = (*hops, current), target
    raise BootPathError(f"{path}: more than {MAX_CHAIN} configurations chained")


def uefi_paths(efi_configs: dict[str, str], read: Callable[[str], str | None]) -> list[BootPath]:
    """The UEFI boot paths: GRUB from the CD (ISO9660 config) and GRUB from the EFI image (its own copy).

    ``efi_configs`` are the ``grub.cfg`` files inside the EFI image (path -> text); ``read`` reads ISO files.
    """
    paths: list[BootPath] = []
    # Booted from the CD, GRUB's $cmdpath is (cd0)/EFI/BOOT; without a config there it uses its prefix.
    cd_config = next((c for c in GRUB_UEFI_CONFIGS if read(c) is not None), None)
    if cd_config is None:
        raise BootPathError(f"no UEFI GRUB configuration on the ISO at {' or '.join(GRUB_UEFI_CONFIGS)}")
    config, via = follow_grub_chain(cd_config, read)
    paths.append(BootPath("uefi", "grub", "iso", config, via))
    for efi_path in sorted(efi_configs):
        text = efi_configs[efi_path]
        if has_grub_menu(text):
            paths.append(BootPath("uefi", "grub", "efi_image", efi_path))
            continue
        target = grub_chain_target(text)
        if target is None:
            raise BootPathError(f"the EFI image's {efi_path} has no installer entry and hands over to no ISO file")
        config, via = follow_grub_chain(target, read, (f"efi_image:{efi_path}",))
        paths.append(BootPath("uefi", "grub", "iso", config, via))
    return paths
