# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and rewrite files inside the El Torito EFI image (a FAT file system), at the same image size.

Why: UEFI firmware that boots the ISO written to a disk or USB stick reads the GRUB configuration from the
FAT image the El Torito EFI entry points at (``images/efiboot.img``, ``boot/grub/efi.img``), not from the
ISO9660 tree, so that copy must be edited too. Editing inside the image keeps its size, so the ISO can swap
the image's bytes without rebuilding its El Torito catalog.

Only pyfatfs's low-level ``PyFat`` is used: its ``PyFatFS`` front end imports PyFilesystem2 (``fs``), whose
``__init__`` needs ``pkg_resources``, which current setuptools no longer ships. Two pyfatfs behaviours are
handled here: it matches names case-sensitively (mtools stores ``grub.cfg`` as the short name ``GRUB.CFG``
with no long name), so names are compared case-insensitively; and it marks the volume dirty while open, so
the image is closed (marked clean again) before its bytes are taken.
"""

from __future__ import annotations

import io
import traceback
import warnings
from dataclasses import dataclass

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

PYFATFS_IMPORT_ERROR: str | None
try:
    from pyfatfs.PyFat import PyFat
except ImportError:
    PYFATFS_IMPORT_ERROR = traceback.format_exc()
else:
    PYFATFS_IMPORT_ERROR = None


class FatImageError(MetalplaneError):
    """The EFI image is not a FAT file system pyfatfs can edit, or a file does not fit in it."""

    kind = "efi_image"


@dataclass(frozen=True)
class FatFile:
    """A file found in the FAT image: its path as stored (long name where there is one) and content."""

    path: str
    data: bytes


class _KeepOpen(io.BytesIO):
    """PyFat closes its file object on ``close()``; the bytes are still needed after it."""

    def close(self) -> None:  # pragma: no cover - trivial
        pass


def _name(entry: object) -> str:
    try:
        return str(entry.get_long_name())  # type: ignore[attr-defined]
    except Exception:  # pyfatfs raises NotAnLFNEntryException for short-name-only entries
        return str(entry.get_short_name())  # type: ignore[attr-defined]


def _open(image: bytes, *, writable: bool) -> tuple[PyFat, _KeepOpen]:
    buffer = _KeepOpen(image)
    fat = PyFat()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not cleanly unmounted": irrelevant for an image we only edit
        try:
            if writable:
                fat.set_fp(buffer)
            else:
                fat.set_fp(io.BufferedReader(io.BytesIO(image)))  # read-only: PyFat leaves the volume untouched
        except Exception as exc:
            raise FatImageError(f"the El Torito EFI image is not a FAT file system pyfatfs can read: {exc}") from exc
    return fat, buffer


def _walk(fat: PyFat) -> list[tuple[str, object, object]]:
    """(path, entry, parent directory entry) for every file, depth first, in directory order."""
    found: list[tuple[str, object, object]] = []

    def visit(directory: object, prefix: str) -> None:
        dirs, files, _specials = directory.get_entries()  # type: ignore[attr-defined]
        for entry in files:
            found.append((f"{prefix}/{_name(entry)}", entry, directory))
        for entry in dirs:
            visit(entry, f"{prefix}/{_name(entry)}")

    visit(fat.root_dir, "")
    return found


def _read(fat: PyFat, entry: object) -> bytes:
    size = int(entry.filesize)  # type: ignore[attr-defined]
    if size == 0:
        return b""
    chunks = [fat.read_cluster_contents(c) for c in fat.get_cluster_chain(entry.get_cluster())]  # type: ignore[attr-defined]
    return b"".join(chunks)[:size]


def find_files(image: bytes, name: str) -> list[FatFile]:
    """Every file whose last path component equals ``name`` ignoring case (``grub.cfg`` finds ``GRUB.CFG``)."""
    fat, _unused = _open(image, writable=False)
    wanted = name.lower()
    return [
        FatFile(path, _read(fat, entry))
        for path, entry, _unused in _walk(fat)
        if path.rsplit("/", 1)[-1].lower() == wanted
    ]


def read_file(image: bytes, path: str) -> bytes:
    """The content of ``path`` (compared ignoring case); FatImageError when absent."""
    fat, _unused = _open(image, writable=False)
    for found, entry, _unused in _walk(fat):
        if found.lower() == path.lower():
            return _read(fat, entry)
    raise FatImageError(f"{path} is not in the El Torito EFI image")


def replace_files(image: bytes, contents: dict[str, bytes]) -> bytes:
    """A copy of ``image`` with each file of ``contents`` (path compared ignoring case) rewritten.

    The image keeps its size: a file may grow into free clusters; clusters a shorter file no longer needs
    are freed. Timestamps are left as they were, so the same edit gives the same bytes.
    """
    fat, buffer = _open(image, writable=True)
    wanted = {path.lower(): data for path, data in contents.items()}
    done: set[str] = set()
    for path, entry, parent in _walk(fat):
        data = wanted.get(path.lower())
        if data is None:
            continue
        _rewrite(fat, entry, parent, data, path)
        done.add(path.lower())
    missing = sorted(set(wanted) - done)
    if missing:
        raise FatImageError(f"{', '.join(missing)} not in the El Torito EFI image")
    fat.flush_fat()
    fat.close()  # marks the volume clean again
    result = buffer.getvalue()
    if len(result) != len(image):  # pragma: no cover - PyFat writes inside the image only
        raise FatImageError("editing the El Torito EFI image changed its size")
    return result


def _rewrite(fat: PyFat, entry: object, parent: object, data: bytes, path: str) -> None:
    cluster = entry.get_cluster()  # type: ignore[attr-defined]
    chain = list(fat.get_cluster_chain(cluster)) if cluster else []
    needed = max(1, fat.calc_num_clusters(len(data)))
    try:
        if not chain:
            chain = fat.allocate_bytes(len(data) or 1)
            entry.set_cluster(chain[0])  # type: ignore[attr-defined]
        elif needed > len(chain):
            fat.write_data_to_cluster(b"\0" * (needed * fat.bytes_per_cluster), chain[0], extend_cluster=True)
            chain = list(fat.get_cluster_chain(chain[0]))
        elif needed < len(chain):
            fat.free_cluster_chain(chain[needed])
            fat.fat[chain[needed - 1]] = fat.FAT_CLUSTER_VALUES[fat.fat_type]["END_OF_CLUSTER_MAX"]
            chain = chain[:needed]
    except Exception as exc:
        raise FatImageError(f"{path} ({len(data)} bytes) does not fit in the El Torito EFI image: {exc}") from exc
    padded = data + b"\0" * (needed * fat.bytes_per_cluster - len(data))
    for index, number in enumerate(chain):
        start = index * fat.bytes_per_cluster
        fat._write_data_to_address(padded[start : start + fat.bytes_per_cluster], fat.get_data_cluster_address(number))
    entry.filesize = len(data)  # type: ignore[attr-defined]
    fat.update_directory_entry(parent)
