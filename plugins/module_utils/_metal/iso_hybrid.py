# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Carry an ISO's hybrid boot records (MBR, GPT, GRUB's boot addresses) over to the rewritten ISO.

Why: installer ISOs are "hybrid": the first 32 KiB (the ISO9660 system area) hold an MBR and often a GPT, so
the same image boots when written to a disk or USB stick, and GRUB's MBR and El Torito image carry the block
address of that image (xorriso ``--grub2-mbr`` and ``--grub2-boot-info``). pycdlib rewrites only SYSLINUX's
isohybrid MBR (the one starting ``33 ed``); for any other it writes zeros there, and every file may move when
the ISO is mastered again. So after pycdlib writes the ISO, the source's system area is copied back and every
block address in it is moved with the content it points at:

- a partition that starts at a file or El Torito image moves with it (the EFI system partition);
- a partition that runs to the end of the ISO9660 data or of the whole image is resized to the new end;
- GRUB's 64-bit addresses at MBR offset 0x1B0 (image block*4+4) and at image offset 2548 (block*4+5) follow the
  El Torito BIOS image;
- a GPT gets its primary header and entries rewritten (CRC32s recomputed) and its backup written in 36 sectors
  appended after the ISO data (UEFI spec 2.10, section 5.3).

Anything else (a partition that starts at something the rewrite does not know) fails the build rather than
produce an image whose disk boot points into the wrong blocks.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError

SYSTEM_AREA = 16 * 2048  # ISO9660: the first 16 logical blocks are the system area
SECTOR = 512
BLOCK = 2048
MBR_SIGNATURE = b"\x55\xaa"
MBR_TABLE = 446
GPT_SIGNATURE = b"EFI PART"
GRUB2_MBR_BOOT_ADDR = 0x1B0  # xorriso --grub2-mbr: El Torito image block*4 + 4, 64-bit LE
GRUB2_BOOT_INFO = 2548  # xorriso --grub2-boot-info: image block*4 + 5, 64-bit LE, inside the image
GPT_BACKUP_SECTORS = 36  # 32 sectors of entries + header, rounded up to whole 2048-byte blocks


class HybridLayoutError(MetalplaneError):
    """The source's hybrid boot records point at something the rewritten ISO cannot relocate."""

    kind = "iso_hybrid"


@dataclass(frozen=True)
class Layout:
    """Where things are, in 2048-byte blocks: extents of files and El Torito images (name -> (block, bytes))."""

    extents: dict[str, tuple[int, int]]
    iso_blocks: int  # ISO9660 volume space size
    image_bytes: int  # file size (may exceed the volume: appended partitions, backup GPT)
    bios_image: str | None  # the key in ``extents`` of the El Torito BIOS image


def needs_carry_over(system_area: bytes, pycdlib_handles_it: bool) -> bool:
    return not pycdlib_handles_it and system_area[510:512] == MBR_SIGNATURE


def _relocate(start: int, end: int, old: Layout, new: Layout, what: str) -> tuple[int, int]:
    """New first/last 512-byte sector of a partition ``start..end`` (inclusive) of the old image."""
    if start % 4 == 0:
        for name, (block, size) in old.extents.items():
            if block * 4 == start and block >= 16 and name in new.extents:
                new_block, new_size = new.extents[name]
                count = end - start + 1 if new_size == size else -(-new_size // SECTOR)
                return new_block * 4, new_block * 4 + count - 1
    old_iso_end, new_iso_end = old.iso_blocks * 4, new.iso_blocks * 4
    if end + 1 == old_iso_end:
        return start, new_iso_end - 1
    if end + 1 >= old.image_bytes // SECTOR:
        return start, new.image_bytes // SECTOR - 1
    raise HybridLayoutError(
        f"{what} (sectors {start}-{end}) starts at nothing the rewrite knows and does not run to the end of the "
        "image; this hybrid layout is not supported"
    )


def _patch_mbr(mbr: bytearray, old: Layout, new: Layout) -> None:
    for index in range(4):
        offset = MBR_TABLE + 16 * index
        ptype = mbr[offset + 4]
        start, count = struct.unpack_from("<II", mbr, offset + 8)
        if count == 0:  # unused slot (type 0 with sectors is a real one: EL's whole-ISO partition)
            continue
        if ptype == 0xEE:  # protective: the whole disk after the MBR
            struct.pack_into("<I", mbr, offset + 12, min(new.image_bytes // SECTOR - 1, 0xFFFFFFFF))
            continue
        first, last = _relocate(start, start + count - 1, old, new, f"MBR partition {index + 1}")
        struct.pack_into("<II", mbr, offset + 8, first, min(last - first + 1, 0xFFFFFFFF))


def _grub_addr(old: Layout, new: Layout, plus: int) -> tuple[int, int] | None:
    if old.bios_image is None or old.bios_image not in new.extents:
        return None
    return old.extents[old.bios_image][0] * 4 + plus, new.extents[old.bios_image][0] * 4 + plus


def _gpt(system_area: bytearray, old: Layout, new: Layout) -> bytes:
    """Rewrite the primary GPT inside ``system_area``; return the backup (entries + header) to append."""
    header = bytearray(system_area[SECTOR : SECTOR + 92])
    (size,) = struct.unpack_from("<I", header, 12)
    entries_lba, count, entry_size = struct.unpack_from("<QII", header, 72)
    entries_off = entries_lba * SECTOR
    if entries_lba != 2 or entries_off + count * entry_size > SYSTEM_AREA:
        raise HybridLayoutError("the GPT's partition entries are not right after its header; not supported")
    entries = bytearray(system_area[entries_off : entries_off + count * entry_size])
    for index in range(count):
        offset = index * entry_size
        if entries[offset : offset + 16] == bytes(16):
            continue
        first, last = struct.unpack_from("<QQ", entries, offset + 32)
        first, last = _relocate(first, last, old, new, f"GPT partition {index + 1}")
        struct.pack_into("<QQ", entries, offset + 32, first, last)
    total = new.image_bytes // SECTOR
    entries_sectors = -(-len(entries) // SECTOR)
    backup_entries_lba = total - 1 - entries_sectors
    entries_crc = zlib.crc32(entries)

    def header_for(my_lba: int, alternate: int, table_lba: int) -> bytes:
        out = bytearray(header)
        struct.pack_into("<I", out, 16, 0)
        struct.pack_into("<QQ", out, 24, my_lba, alternate)
        struct.pack_into("<Q", out, 48, backup_entries_lba - 1)  # last usable LBA
        struct.pack_into("<Q", out, 72, table_lba)
        struct.pack_into("<I", out, 88, entries_crc)
        struct.pack_into("<I", out, 16, zlib.crc32(out[:size]))
        return bytes(out)

    system_area[SECTOR : SECTOR + 92] = header_for(1, total - 1, 2)
    system_area[entries_off : entries_off + len(entries)] = entries
    backup = bytearray(GPT_BACKUP_SECTORS * SECTOR)
    start = (GPT_BACKUP_SECTORS - 1 - entries_sectors) * SECTOR
    backup[start : start + len(entries)] = entries
    backup[-SECTOR : -SECTOR + 92] = header_for(total - 1, 1, backup_entries_lba)
    return bytes(backup)


def carry_over(
    system_area: bytes, out: BinaryIO, old: Layout, new_layout: Callable[[int], Layout]
) -> dict[str, object]:
    """Write the source's system area into ``out`` (the rewritten ISO, positioned anywhere), relocated.

    ``new_layout(image_bytes)`` gives the new layout for a final image size (the size grows when a backup GPT
    is appended). Returns what was done, for the module result.
    """
    area = bytearray(system_area)
    has_gpt = area[SECTOR : SECTOR + 8] == GPT_SIGNATURE
    out.seek(0, 2)
    iso_end = out.tell()
    new = new_layout(iso_end + (GPT_BACKUP_SECTORS * SECTOR if has_gpt else 0))
    done: dict[str, object] = {"mbr": True, "gpt": has_gpt, "grub_mbr_address": False, "grub_boot_info": False}
    mbr = bytearray(area[:SECTOR])
    _patch_mbr(mbr, old, new)
    addr = _grub_addr(old, new, 4)
    if addr and struct.unpack_from("<Q", mbr, GRUB2_MBR_BOOT_ADDR)[0] == addr[0]:
        struct.pack_into("<Q", mbr, GRUB2_MBR_BOOT_ADDR, addr[1])
        done["grub_mbr_address"] = True
    area[:SECTOR] = mbr
    backup = _gpt(area, old, new) if has_gpt else b""
    out.seek(0)
    out.write(bytes(area))
    if backup:
        out.seek(iso_end)
        out.write(backup)
    info = _grub_addr(old, new, 5)
    if info and old.bios_image:
        block = new.extents[old.bios_image][0]
        out.seek(block * BLOCK + GRUB2_BOOT_INFO)
        current = out.read(8)
        if len(current) == 8 and struct.unpack("<Q", current)[0] == info[0]:
            out.seek(block * BLOCK + GRUB2_BOOT_INFO)
            out.write(struct.pack("<Q", info[1]))
            done["grub_boot_info"] = True
    return done
