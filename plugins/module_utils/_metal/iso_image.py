# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Master a per-host installer ISO: the vendor ISO, its boot paths edited, the unattended files added.

Why pycdlib (pure Python): the controller and the execution environment then need no xorriso. What pycdlib
does not do by itself is handled here:

- it refuses to remove a file the El Torito catalog references, so the EFI image is edited inside (same size,
  ``iso_fat``) and its bytes swapped on the catalog entry's inode; the catalog stays as it was;
- its timestamps come from ``time.time()`` and ``time.localtime()``, so the clock is fixed (to the source
  volume's modification date, in UTC) while it masters, which makes the same inputs give the same bytes;
- it keeps only SYSLINUX's isohybrid MBR, so other hybrid boot records are carried over by ``iso_hybrid``.

The volume ID is kept: EL boot entries find their stage2 by ``inst.stage2=hd:LABEL=<volume ID>``.
"""

from __future__ import annotations

import calendar
import contextlib
import io
import posixpath
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, MetalplaneError

from . import iso_bootpaths, iso_fat, iso_hybrid
from .iso_bootpaths import BootPath, BootPathError, KernelEdit

PYCDLIB_IMPORT_ERROR: str | None
try:
    import pycdlib
    import pycdlib.dates
    import pycdlib.headervd
    import pycdlib.pycdlib
    import pycdlib.udf
except ImportError:
    PYCDLIB_IMPORT_ERROR = traceback.format_exc()
else:
    PYCDLIB_IMPORT_ERROR = None

BLOCK = 2048
PLATFORM_BIOS = 0x00  # El Torito platform IDs (El Torito 1.0, section 2.1; 0xEF from UEFI 2.x)
PLATFORM_UEFI = 0xEF
FALLBACK_EPOCH = 946684800  # 2000-01-01T00:00:00Z, when the source has no usable modification date
# The pycdlib modules that read the clock (pycdlib 1.22: time.time() for new records and descriptors,
# time.localtime() to encode dates, which would make the output depend on the machine's time zone).
_CLOCKED_MODULES = ("pycdlib.pycdlib", "pycdlib.headervd", "pycdlib.dates", "pycdlib.udf", "pycdlib.inplaceeditor")


class IsoError(MetalplaneError):
    """The source ISO cannot be read or mastered again."""

    kind = "iso"


class _FixedClock:
    """Stands in for the ``time`` module inside pycdlib: a fixed ``time()``, UTC ``localtime()``."""

    def __init__(self, epoch: float) -> None:
        self._epoch = epoch

    def time(self) -> float:
        return self._epoch

    def localtime(self, seconds: float | None = None) -> time.struct_time:
        return time.gmtime(self._epoch if seconds is None else seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def fixed_clock(epoch: float) -> Iterator[None]:
    import sys

    saved = {}
    for name in _CLOCKED_MODULES:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "time"):
            saved[name] = module.time
            module.time = _FixedClock(epoch)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for name, original in saved.items():
            sys.modules[name].time = original  # type: ignore[attr-defined]


@dataclass
class BuildResult:
    boot_paths: list[BootPath]
    volume_id: str
    added: list[str]
    edited: list[str]
    hybrid: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class _Entry:
    platform: int
    entry: Any  # pycdlib EltoritoEntry
    path: str | None  # the file it boots, when it is one (Ubuntu's EFI image is an appended partition)


class _Iso:
    """Read access to an open pycdlib ISO by Rock Ridge path (ISO9660 path when it has no Rock Ridge)."""

    def __init__(self, iso: Any) -> None:
        self.iso = iso
        self.rock_ridge = bool(iso.has_rock_ridge())
        self.records: dict[str, Any] = {}
        facade = {"rr_path": "/"} if self.rock_ridge else {"iso_path": "/"}
        for root, _dirs, files in iso.walk(**facade):
            for name in files:
                path = posixpath.join(root, name)
                key = path if self.rock_ridge else path.split(";")[0].lower()
                self.records[key] = self._record(path)

    def _record(self, path: str) -> Any:
        return self.iso.get_record(**({"rr_path": path} if self.rock_ridge else {"iso_path": path}))

    def find(self, path: str) -> str | None:
        """The stored path matching ``path`` (exact, then ignoring case, as ISOLINUX and GRUB on ISO9660 do)."""
        if path in self.records:
            return path
        lowered = path.lower()
        return next((p for p in self.records if p.lower() == lowered), None)

    def read(self, path: str) -> bytes | None:
        found = self.find(path)
        if found is None:
            return None
        out = io.BytesIO()
        self.iso.get_file_from_iso_fp(
            out, **({"rr_path": found} if self.rock_ridge else {"iso_path": self._iso9660(found)})
        )
        return out.getvalue()

    def read_text(self, path: str) -> str | None:
        data = self.read(path)
        return None if data is None else data.decode("utf-8", "replace")

    def _iso9660(self, path: str) -> str:
        return self.iso.full_path_from_dirrecord(self.records[path])

    def path_at(self, extent: int) -> str | None:
        return next((p for p, r in self.records.items() if r.extent_location() == extent and r.get_data_length()), None)


def _entries(iso: Any) -> list[_Entry]:
    catalog = iso.eltorito_boot_catalog
    if catalog is None:
        raise IsoError("the source ISO has no El Torito boot catalog, so it cannot boot from virtual media")
    found = [(catalog.validation_entry.platform_id, catalog.initial_entry)]
    for section in catalog.sections:
        found += [(section.platform_id, entry) for entry in section.section_entries]
    return [_Entry(platform, entry, None) for platform, entry in found]


def _source_epoch(iso: Any) -> float:
    date = iso.pvd.volume_modification_date
    try:
        epoch = calendar.timegm((date.year, date.month, date.dayofmonth, date.hour, date.minute, date.second, 0, 0, 0))
        epoch -= date.gmtoffset * 15 * 60
    except (AttributeError, TypeError, ValueError, OverflowError):
        return FALLBACK_EPOCH
    return float(epoch) if epoch > 0 else float(FALLBACK_EPOCH)


def volume_id(source: Path) -> str:
    """The source ISO's volume ID (checked before anything is rendered)."""
    iso = pycdlib.PyCdlib()
    try:
        iso.open(str(source))
    except Exception as exc:
        raise InputError("iso_url", f"the downloaded file is not an ISO9660 image pycdlib can read: {exc}") from exc
    try:
        return iso.pvd.volume_identifier.decode("ascii", "replace").rstrip(" \0")
    finally:
        iso.close()


def _iso9660_name(rr_path: str, level: int, used: dict[str, set[str]]) -> str:
    """An ISO9660 path for a new file (8.3 names at interchange level 1, d-characters only)."""
    directory, name = posixpath.split(rr_path)
    stem, _unused, ext = name.upper().rpartition(".")
    if not stem:
        stem, ext = ext, ""
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    clean_ext = "".join(c if c.isalnum() or c == "_" else "_" for c in ext)
    stem_max = 8 if level == 1 else 30 - len(clean_ext)
    taken = used.setdefault(directory, set())
    candidate = clean[:stem_max]
    counter = 0
    while f"{candidate}.{clean_ext[:3]}" in taken:
        counter += 1
        candidate = f"{clean[: stem_max - 2]}_{counter}"
    taken.add(f"{candidate}.{clean_ext[:3]}")
    return f"{_iso9660_dir(directory)}/{candidate}.{clean_ext[:3]};1".replace("//", "/")


def _iso9660_dir(rr_dir: str) -> str:
    return "/" + "/".join(
        "".join(c if c.isalnum() or c == "_" else "_" for c in part.upper())[:8]
        for part in rr_dir.strip("/").split("/")
        if part
    )


def _isolinux_files(view: _Iso, top: str) -> dict[str, str]:
    """The ISOLINUX configuration and every file it includes, in include order (paths as stored)."""
    base = posixpath.dirname(top)
    ordered: dict[str, str] = {}

    def visit(path: str) -> None:
        found = view.find(path)
        if found is None or found in ordered:
            return
        text = view.read_text(found) or ""
        ordered[found] = text
        for name in iso_bootpaths.isolinux_includes(text):
            visit(name if name.startswith("/") else posixpath.join(base, name))

    visit(top)
    return ordered


def build(source: Path, dest: Path, files: dict[str, bytes], edit: KernelEdit) -> BuildResult:
    """Write ``dest``: ``source`` with every boot path edited by ``edit`` and ``files`` added (Rock Ridge paths)."""
    iso = pycdlib.PyCdlib()
    iso.open(str(source))
    try:
        return _build(iso, source, dest, files, edit)
    finally:
        iso.close()


def _build(  # noqa: PLR0912, PLR0915 - one linear flow: find the boot paths, edit them, master, carry over
    iso: Any, source: Path, dest: Path, files: dict[str, bytes], edit: KernelEdit
) -> BuildResult:
    view = _Iso(iso)
    entries = [_Entry(e.platform, e.entry, view.path_at(e.entry.get_rba())) for e in _entries(iso)]
    bios = [e for e in entries if e.platform == PLATFORM_BIOS]
    uefi = [e for e in entries if e.platform == PLATFORM_UEFI]
    volid = iso.pvd.volume_identifier.decode("ascii", "replace").rstrip(" \0")
    with source.open("rb") as raw:
        system_area = raw.read(iso_hybrid.SYSTEM_AREA)

    iso_edits: dict[str, str] = {}
    boot_paths: list[BootPath] = []
    for entry in bios[:1]:
        image = _entry_bytes(view, entry, source)
        loader = iso_bootpaths.bios_loader(entry.path, image)
        config = iso_bootpaths.bios_config(loader, entry.path, lambda p: view.find(p) is not None)
        config = view.find(config) or config
        if loader == "isolinux":
            edited, _unused = iso_bootpaths.edit_isolinux(_isolinux_files(view, config), config, edit)
            iso_edits.update(edited)
            boot_paths.append(BootPath("bios", "isolinux", "iso", config))
        else:
            target, via = iso_bootpaths.follow_grub_chain(config, view.read_text)
            iso_edits.setdefault(target, "")
            boot_paths.append(BootPath("bios", "grub", "iso", target, via))
    if not bios:
        raise BootPathError("the El Torito catalog has no BIOS entry")
    if not uefi:
        raise BootPathError("the El Torito catalog has no UEFI entry; the R730 provisioning boots UEFI")
    efi_entry = uefi[0]
    efi_image = _entry_bytes(view, efi_entry, source)
    efi_configs = {f.path: f.data.decode("utf-8", "replace") for f in iso_fat.find_files(efi_image, "grub.cfg")}
    efi_edits: dict[str, bytes] = {}
    for path in iso_bootpaths.uefi_paths(efi_configs, lambda p: view.read_text(view.find(p) or p)):
        boot_paths.append(path)
        if path.where == "iso":
            iso_edits.setdefault(view.find(path.config) or path.config, "")
        else:
            efi_edits[path.config] = iso_bootpaths.edit_grub_cfg(efi_configs[path.config], edit).text.encode()
    for path, text in list(iso_edits.items()):
        if not text:  # a GRUB menu (ISOLINUX files were edited above)
            iso_edits[path] = iso_bootpaths.edit_grub_cfg(view.read_text(path) or "", edit).text

    # Layout before the rewrite, for the hybrid carry-over.
    old_layout = _layout(view, entries, iso, source.stat().st_size)
    pycdlib_hybrid = iso.isohybrid_mbr is not None

    with fixed_clock(_source_epoch(iso)):
        for path in sorted(iso_edits):
            _replace(view, path, iso_edits[path].encode())
        if efi_edits:
            new_image = iso_fat.replace_files(efi_image, efi_edits)
            efi_entry.entry.inode.update_fp(io.BytesIO(new_image), len(new_image))
        _add_files(iso, view, files)
        with dest.open("wb") as out:
            iso.write_fp(out)
    result = BuildResult(
        boot_paths, volid, sorted(files), sorted(iso_edits) + [f"efi_image:{p}" for p in sorted(efi_edits)]
    )
    if iso_hybrid.needs_carry_over(system_area, pycdlib_hybrid):
        new_view = _Iso(iso)
        moved = [_Entry(e.platform, e.entry, e.path) for e in entries]
        with dest.open("r+b") as out:
            result.hybrid = iso_hybrid.carry_over(
                system_area, out, old_layout, lambda size: _layout(new_view, moved, iso, size)
            )
    elif pycdlib_hybrid:
        result.hybrid = {"mbr": True, "isohybrid": True}
    return result


def _entry_bytes(view: _Iso, entry: _Entry, source: Path) -> bytes:
    if entry.path is not None:
        data = view.read(entry.path)
        if data is not None:
            return data
    # Not a file (Ubuntu's EFI image is an appended partition): read what the catalog entry points at.
    inode = entry.entry.inode
    length = inode.get_data_length() if inode is not None else entry.entry.length()
    with source.open("rb") as raw:
        raw.seek(entry.entry.get_rba() * BLOCK)
        return raw.read(length)


def _layout(view: _Iso, entries: list[_Entry], iso: Any, image_bytes: int) -> iso_hybrid.Layout:
    extents = {path: (record.extent_location(), record.get_data_length()) for path, record in view.records.items()}
    bios_name = None
    for index, entry in enumerate(entries):
        name = entry.path or f"eltorito:{index}"
        inode = entry.entry.inode
        length = inode.get_data_length() if inode is not None else entry.entry.length()
        extents[name] = (entry.entry.get_rba(), length)
        if entry.platform == PLATFORM_BIOS and bios_name is None:
            bios_name = name
    return iso_hybrid.Layout(extents, iso.pvd.space_size, image_bytes, bios_name)


def _facade(view: _Iso, path: str) -> dict[str, str]:
    """The paths of an existing file in every tree the ISO has."""
    record = view.records[path]
    paths = {"iso_path": view.iso.full_path_from_dirrecord(record)}
    if view.iso.has_joliet():
        with contextlib.suppress(Exception):
            view.iso.get_record(joliet_path=path)
            paths["joliet_path"] = path
    return paths


def _replace(view: _Iso, path: str, data: bytes) -> None:
    """Give an existing file new content (remove it and add it back under the same names)."""
    names = _facade(view, path)
    view.iso.rm_file(iso_path=names["iso_path"])
    extra: dict[str, str] = {}
    if view.rock_ridge:
        extra["rr_name"] = posixpath.basename(path)
    if "joliet_path" in names:
        extra["joliet_path"] = names["joliet_path"]
    view.iso.add_fp(io.BytesIO(data), len(data), iso_path=names["iso_path"], **extra)


def _add_files(iso: Any, view: _Iso, files: dict[str, bytes]) -> None:
    level = int(getattr(iso, "interchange_level", 1) or 1)
    used: dict[str, set[str]] = {}
    made: set[str] = set()
    for path in sorted(files):
        existing = view.find(path)
        if existing is not None:
            _replace(view, existing, files[path])
            continue
        directory = posixpath.dirname(path)
        parts = [p for p in directory.split("/") if p]
        for depth in range(1, len(parts) + 1):
            rr_dir = "/" + "/".join(parts[:depth])
            if rr_dir in made or any(p.startswith(rr_dir + "/") for p in view.records):
                continue
            kwargs: dict[str, str] = {}
            if view.rock_ridge:
                kwargs["rr_name"] = parts[depth - 1]
            if iso.has_joliet():
                kwargs["joliet_path"] = rr_dir
            iso.add_directory(_iso9660_dir(rr_dir), **kwargs)
            made.add(rr_dir)
        kwargs = {}
        if view.rock_ridge:
            kwargs["rr_name"] = posixpath.basename(path)
        if iso.has_joliet():
            kwargs["joliet_path"] = path
        data = files[path]
        iso.add_fp(io.BytesIO(data), len(data), iso_path=_iso9660_name(path, level, used), **kwargs)
