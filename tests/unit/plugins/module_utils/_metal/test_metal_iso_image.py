"""Round trips: master the three vendor-shaped ISOs, reopen them, and find everything where it must be.

Each case builds a per-host ISO from a shape (tests/support/vendor_isos.py) and checks that every boot path the
El Torito catalog leads to starts the unattended install, that the catalog and the hybrid boot records (MBR,
GPT, GRUB's boot addresses) point at the right blocks of the new ISO, that the rest of the ISO is unchanged,
and that building twice gives the same bytes.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from metal_support import HOST_KEY, IsoReader, settings

from ansible_collections.metalplane.inference.plugins.module_utils._metal import iso_fat, iso_image, unattended
from ansible_collections.metalplane.inference.plugins.module_utils._metal.cpio import read_newc
from support import vendor_isos as shapes

# shape, family, ISO configs that must start the install, the argument that proves it, files added
CASES = [
    (
        "el10",
        "el",
        {"/boot/grub2/grub.cfg", "/EFI/BOOT/grub.cfg"},
        "inst.ks=hd:LABEL=CentOS-Stream-10-BaseOS-x86_64:/ks.cfg",
        ["/ks.cfg"],
    ),
    (
        "ubuntu2404",
        "ubuntu",
        {"/boot/grub/grub.cfg"},
        "autoinstall ds=nocloud\\;s=/cdrom/nocloud/",
        ["/nocloud/meta-data", "/nocloud/metalplane-disk.sh", "/nocloud/metalplane-finish.sh", "/nocloud/user-data"],
    ),
    (
        "debian12",
        "debian",
        {"/boot/grub/grub.cfg", "/isolinux/isolinux.cfg"},
        "auto=true priority=critical",
        ["/preseed.img"],
    ),
]


def _build(
    vendor_iso: Callable[[str], Path], shape: str, family: str, dest: Path, **overrides: object
) -> iso_image.BuildResult:
    source = vendor_iso(shape)
    rendered = unattended.render(settings(os_family=family, **overrides), HOST_KEY, iso_image.volume_id(source))
    return iso_image.build(source, dest, rendered.files, rendered.kernel_edit)


@pytest.mark.parametrize(("shape", "family", "configs", "proof", "added"), CASES)
def test_round_trip(  # noqa: PLR0917
    vendor_iso: Callable[[str], Path],
    tmp_path: Path,
    shape: str,
    family: str,
    configs: set[str],
    proof: str,
    added: list[str],
) -> None:
    dest = tmp_path / "host.iso"
    result = _build(vendor_iso, shape, family, dest)
    source = IsoReader(vendor_iso(shape))
    out = IsoReader(dest)
    try:
        assert result.added == added
        assert out.iso.pvd.volume_identifier == source.iso.pvd.volume_identifier  # inst.stage2=hd:LABEL= still works
        assert {p.config for p in result.boot_paths if p.where == "iso"} == configs
        assert {p.firmware for p in result.boot_paths} == {"bios", "uefi"}
        # Every boot path's configuration starts the install with no prompt.
        for path in result.boot_paths:
            text = out.text(path.config) if path.where == "iso" else _efi_file(out, path.config)
            _assert_unattended(text, proof, path.loader)
        # The unattended files are on the ISO as rendered.
        rendered = unattended.render(settings(os_family=family), HOST_KEY, result.volume_id)
        for name in added:
            assert out.read(name) == rendered.files[name]
        # Kernels and initrds are untouched.
        for name, data in shapes.SHAPES[shape]().files.items():
            if "vmlinuz" in name or "initrd" in name:
                assert out.read(name) == data
        _assert_eltorito_intact(source, out, dest)
    finally:
        source.close()
        out.close()


def _efi_file(reader: IsoReader, path: str) -> str:
    platform, entry = reader.entries()[1]
    assert platform == 0xEF
    return iso_fat.read_file(_entry_bytes(reader, entry), path).decode()


def _entry_bytes(reader: IsoReader, entry: object) -> bytes:
    path = Path(reader.iso._cdfp.name)
    with path.open("rb") as raw:
        raw.seek(entry.get_rba() * 2048)  # type: ignore[attr-defined]
        return raw.read(entry.inode.get_data_length())  # type: ignore[attr-defined]


def _assert_unattended(text: str, proof: str, loader: str) -> None:
    if loader == "isolinux":
        assert text.rstrip().endswith("prompt 0\ntimeout 1")
        return
    assert 'set default="0"\nset timeout_style=hidden\nset timeout=0\n' in text
    assert proof in text
    if "preseed" in proof or "auto=true" in proof:
        assert " /preseed.img" in text


def _assert_eltorito_intact(source: IsoReader, out: IsoReader, dest: Path) -> None:
    before, after = source.entries(), out.entries()
    assert [(p, e.sector_count) for p, e in before] == [(p, e.sector_count) for p, e in after]
    for (_unused, old), (_unused2, new) in zip(before, after, strict=True):
        old_bytes, new_bytes = _entry_bytes(source, old), _entry_bytes(out, new)
        assert len(old_bytes) == len(new_bytes)
        if old.sector_count == 4:  # the BIOS image: same code; pycdlib and we patch only its boot addresses
            assert old_bytes[64:2048] == new_bytes[64:2048]


def _mbr_parts(head: bytes) -> list[tuple[int, int, int]]:
    return [struct.unpack_from("<4xB3xII", head, 446 + 16 * i) for i in range(4)]


def test_el10_hybrid_mbr_follows_the_moved_images(vendor_iso: Callable[[str], Path], tmp_path: Path) -> None:
    dest = tmp_path / "el.iso"
    result = _build(vendor_iso, "el10", "el", dest)
    assert result.hybrid == {"mbr": True, "gpt": False, "grub_mbr_address": True, "grub_boot_info": True}
    source_head = vendor_iso("el10").read_bytes()[:512]
    data = dest.read_bytes()
    out = IsoReader(dest)
    try:
        (_unused, bios), (_unused2, efi) = out.entries()
        assert data[:432] == source_head[:432]  # GRUB's MBR code
        assert struct.unpack_from("<Q", data, 0x1B0)[0] == bios.get_rba() * 4 + 4
        assert struct.unpack_from("<Q", data, bios.get_rba() * 2048 + 2548)[0] == bios.get_rba() * 4 + 5
        parts = _mbr_parts(data[:512])
        assert parts[0] == (0x00, 0, len(data) // 512)  # the whole ISO
        assert parts[1] == (0xEF, efi.get_rba() * 4, efi.inode.get_data_length() // 512)  # the EFI image
        assert data[510:512] == b"\x55\xaa"
    finally:
        out.close()


def _gpt(data: bytes, lba: int) -> tuple[dict[str, int], list[tuple[int, int]]]:
    header = data[lba * 512 : lba * 512 + 92]
    assert header[:8] == b"EFI PART"
    crc = struct.unpack_from("<I", header, 16)[0]
    assert zlib.crc32(header[:16] + b"\0\0\0\0" + header[20:]) == crc
    my_lba, alt_lba = struct.unpack_from("<QQ", header, 24)
    entries_lba, count, size, entries_crc = struct.unpack_from("<QIII", header, 72)
    entries = data[entries_lba * 512 : entries_lba * 512 + count * size]
    assert zlib.crc32(entries) == entries_crc
    parts = [
        struct.unpack_from("<QQ", entries, i * size + 32)
        for i in range(count)
        if entries[i * size : i * size + 16] != bytes(16)
    ]
    return {"my": my_lba, "alt": alt_lba}, parts


def test_ubuntu_gpt_follows_the_moved_efi_partition(vendor_iso: Callable[[str], Path], tmp_path: Path) -> None:
    dest = tmp_path / "ubuntu.iso"
    result = _build(vendor_iso, "ubuntu2404", "ubuntu", dest)
    assert result.hybrid["gpt"] is True
    data = dest.read_bytes()
    total = len(data) // 512
    out = IsoReader(dest)
    try:
        (_unused, _bios), (_unused2, efi) = out.entries()
        primary, parts = _gpt(data, 1)
        backup, backup_parts = _gpt(data, total - 1)
        assert (primary["my"], primary["alt"]) == (1, total - 1)
        assert (backup["my"], backup["alt"]) == (total - 1, 1)
        assert parts == backup_parts
        iso_end = out.iso.pvd.space_size * 4
        assert parts[0] == (64, iso_end - 1)  # the ISO9660 data, resized
        assert parts[1] == (efi.get_rba() * 4, efi.get_rba() * 4 + efi.inode.get_data_length() // 512 - 1)
        assert _mbr_parts(data[:512])[0] == (0xEE, 1, total - 1)  # protective MBR over the whole image
    finally:
        out.close()


def test_debian_isohybrid_mbr_is_kept_by_pycdlib(vendor_iso: Callable[[str], Path], tmp_path: Path) -> None:
    dest = tmp_path / "debian.iso"
    result = _build(vendor_iso, "debian12", "debian", dest)
    assert result.hybrid == {"mbr": True, "isohybrid": True}
    out = IsoReader(dest)
    try:
        (_unused, bios), (_unused2, efi) = out.entries()
        hybrid = out.iso.isohybrid_mbr
        assert hybrid is not None
        assert hybrid.efi
        assert hybrid.rba == bios.get_rba() * 4  # in 512-byte sectors
        assert hybrid.efi_lba == efi.get_rba()
        # The preseed initrd is listed after the installer's own in every edited ISOLINUX label.
        assert "initrd=/install.amd/initrd.gz,/preseed.img" in out.text("/isolinux/txt.cfg")
        assert "preseed.cfg" in read_newc(out.read("/preseed.img"))
    finally:
        out.close()


@pytest.mark.parametrize(("shape", "family"), [("el10", "el"), ("ubuntu2404", "ubuntu"), ("debian12", "debian")])
def test_same_inputs_same_bytes(vendor_iso: Callable[[str], Path], tmp_path: Path, shape: str, family: str) -> None:
    first, second, other = tmp_path / "a.iso", tmp_path / "b.iso", tmp_path / "c.iso"
    _build(vendor_iso, shape, family, first)
    _build(vendor_iso, shape, family, second)
    _build(vendor_iso, shape, family, other, generation=4)
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second, other)]
    assert digest[0] == digest[1]
    assert digest[0] != digest[2]


def test_fixed_clock_is_restored() -> None:
    import time

    import pycdlib.pycdlib

    with iso_image.fixed_clock(1000.0):
        assert pycdlib.pycdlib.time.time() == 1000.0
        assert pycdlib.pycdlib.time.localtime(0) == time.gmtime(0)
    assert pycdlib.pycdlib.time is time
