"""Small installer ISOs shaped like the real EL 10, Ubuntu 24.04 and Debian 12 ones, for the boot_iso tests.

Why: the vendor ISOs cannot be downloaded here, and the boot_iso code must find the boot paths from the El
Torito catalog, not from a list of known paths. Each shape copies its real ISO's El Torito catalog (boot
catalog path, BIOS boot image, EFI image and where it lives), boot loaders (Debian's packages of the same
loaders, fetched by ``make bootloaders``), volume-ID convention, boot configuration paths and menu layout,
and hybrid MBR/GPT style; kernels and initrds are a few bytes (docs/modules/metal.md lists what each shape
copies and what it leaves out). Real boots are the opt-in VM lane's (docs/testing/metal-vm.md).

``build_shape(name, dest)`` writes one ISO; ``BOOTLOADERS`` is where ``scripts/fetch-bootloaders.sh`` puts
the loaders, and ``require_bootloaders()`` skips a test, naming ``make bootloaders``, when they are absent.
"""

from __future__ import annotations

import gzip
import io
import struct
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

import pycdlib
import pytest
from pyfatfs.EightDotThree import EightDotThree
from pyfatfs.FATDirectoryEntry import FATDirectoryEntry, make_lfn_entry
from pyfatfs.PyFat import PyFat

from support.collection import REPO_ROOT

BOOTLOADERS = REPO_ROOT / ".build" / "bootloaders"
LOADER_FILES = (
    "isolinux.bin",
    "isohdpfx.bin",
    "ldlinux.c32",
    "cdboot.img",
    "boot_hybrid.img",
    "grubx64.efi",
    "shimx64.efi",
)

# The volume IDs the real ISOs carry (the EL boot entries find stage2 by it: inst.stage2=hd:LABEL=...).
EL10_VOLID = "CentOS-Stream-10-BaseOS-x86_64"
UBUNTU_VOLID = "Ubuntu-Server 24.04.1 LTS amd64"
DEBIAN_VOLID = "Debian 12.8.0 amd64 n"
FAT_IMAGE_BYTES = 6 * 1024 * 1024  # holds shim + signed GRUB (about 5.2 MB), like the real images
GRUB2_BOOT_INFO_OFFSET = 2548  # xorriso --grub2-boot-info: LBA*4+5 of the image, 64-bit little-endian
GRUB2_MBR_BOOT_ADDR_OFFSET = 0x1B0  # xorriso --grub2-mbr: LBA*4+4 of the El Torito image, 64-bit LE
GPT_BACKUP_PAD = 36 * 512  # room after the ISO9660 data for the backup GPT (33 sectors), 2048-aligned


def require_bootloaders() -> Path:
    """The boot loader directory, or skip the test naming the make target that fetches it."""
    missing = [name for name in LOADER_FILES if not (BOOTLOADERS / name).is_file()]
    if missing:
        pytest.skip(f"boot loaders absent at {BOOTLOADERS} ({', '.join(missing)}): run `make bootloaders`")
    return BOOTLOADERS


def loader(name: str) -> bytes:
    return (BOOTLOADERS / name).read_bytes()


# --------------------------------------------------------------------------------------------------
# FAT images (the El Torito EFI image), written with pyfatfs's low-level API like mtools would.


def make_fat_image(files: dict[str, bytes], size: int = FAT_IMAGE_BYTES) -> bytes:
    """A FAT12 image holding ``files`` (paths like ``/EFI/BOOT/BOOTX64.EFI``).

    A name that is already an upper-case 8.3 name is stored as a short name only (what mtools does for
    ``GRUB.CFG``); any other name gets a long-name entry, as mtools and Linux vfat write it.
    """
    with tempfile.NamedTemporaryFile() as handle:
        handle.truncate(size)
        fat = PyFat()
        fat.mkfs(handle.name, PyFat.FAT_TYPE_FAT12, size=size, label="EFIBOOT", volume_id=0x12345678)
        fat.close()
        fat = PyFat()
        fat.open(handle.name)
        dirs: dict[str, object] = {"": fat.root_dir}
        for path in sorted(files):
            parts = path.strip("/").split("/")
            parent_key = ""
            for part in parts[:-1]:
                key = f"{parent_key}/{part}"
                if key not in dirs:
                    dirs[key] = _fat_mkdir(fat, dirs[parent_key], part, parent_key == "")
                parent_key = key
            _fat_add_file(fat, dirs[parent_key], parts[-1], files[path])
        fat.flush_fat()
        fat.close()
        return Path(handle.name).read_bytes()


def _short_name(fat: PyFat, name: str, parent: object) -> tuple[EightDotThree, bool]:
    short = EightDotThree(encoding=fat.encoding)
    short.set_str_name(short.make_8dot3_name(name, parent))
    needs_lfn = short.get_unpadded_filename() != name
    return short, needs_lfn


def _fat_mkdir(fat: PyFat, parent: object, name: str, parent_is_root: bool) -> object:
    short, needs_lfn = _short_name(fat, name, parent)
    entry = FATDirectoryEntry.new(name=short, tz=UTC, encoding=fat.encoding, attr=FATDirectoryEntry.ATTR_DIRECTORY)
    if needs_lfn:
        entry.set_lfn_entry(make_lfn_entry(name, short))
    cluster = fat.allocate_bytes(64, erase=True)[0]
    entry.set_cluster(cluster)
    for dot_name, source, target_cluster in ((b".          ", entry, cluster), (b"..         ", parent, 0)):
        dot = FATDirectoryEntry.new(
            name=EightDotThree(), tz=UTC, encoding=fat.encoding, attr=FATDirectoryEntry.ATTR_DIRECTORY
        )
        dot.name.set_byte_name(dot_name)
        dot.set_cluster(target_cluster if source is parent and parent_is_root else source.get_cluster())
        entry.add_subdirectory(dot)
    fat.update_directory_entry(entry)
    parent.add_subdirectory(entry)
    fat.update_directory_entry(parent)
    return entry


def _fat_add_file(fat: PyFat, parent: object, name: str, data: bytes) -> None:
    short, needs_lfn = _short_name(fat, name, parent)
    entry = FATDirectoryEntry.new(name=short, tz=UTC, encoding=fat.encoding)
    if needs_lfn:
        entry.set_lfn_entry(make_lfn_entry(name, short))
    if data:
        chain = fat.allocate_bytes(len(data))
        entry.set_cluster(chain[0])
        fat.write_data_to_cluster(data, chain[0])
    entry.filesize = len(data)
    parent.add_subdirectory(entry)
    fat.update_directory_entry(parent)


# --------------------------------------------------------------------------------------------------
# The three shapes.


def _gz_cpio(name: str, data: bytes) -> bytes:
    """A gzip'd newc cpio with one file: stands in for an installer initrd (its bytes must survive)."""
    body = io.BytesIO()
    for member, content, mode in ((name, data, 0o100755), ("TRAILER!!!", b"", 0)):
        encoded = member.encode() + b"\0"
        header = b"070701" + b"".join(
            f"{v:08x}".encode() for v in (1, mode, 0, 0, 1, 0, len(content), 0, 0, 0, 0, len(encoded), 0)
        )
        body.write(header + encoded + b"\0" * (-(110 + len(encoded)) % 4) + content + b"\0" * (-len(content) % 4))
    return gzip.compress(body.getvalue(), mtime=0)


@dataclass
class Shape:
    """One vendor-shaped ISO: its files, El Torito entries and hybrid style."""

    name: str
    volid: str
    files: dict[str, bytes]
    boot_catalog: str
    bios_image: str
    bios_loader: str  # isolinux | grub
    efi_image: str
    efi_hidden: bool  # the EFI image is not in the ISO9660 tree (Ubuntu: an appended GPT partition)
    hybrid: str  # isohybrid (pycdlib/syslinux MBR + GPT) | grub_mbr (GRUB MBR, two MBR partitions) | grub_gpt
    configs: dict[str, str] = field(default_factory=dict)


EL10_GRUB_CFG = """\
set default="1"

function load_video {
  insmod all_video
}

load_video
set gfxpayload=keep
insmod gzio
insmod part_gpt
insmod ext2
insmod chain

set timeout=60
### END /etc/grub.d/00_header ###

search --no-floppy --set=root -l '{volid}'

### BEGIN /etc/grub.d/10_linux ###
menuentry 'Install CentOS Stream 10' --class fedora --class gnu-linux --class gnu --class os {
\tlinux{efi} /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={volid} quiet
\tinitrd{efi} /images/pxeboot/initrd.img
}
menuentry 'Test this media & install CentOS Stream 10' --class fedora --class gnu-linux --class gnu --class os {
\tlinux{efi} /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={volid} rd.live.check quiet
\tinitrd{efi} /images/pxeboot/initrd.img
}
submenu 'Troubleshooting -->' {
\tmenuentry 'Install CentOS Stream 10 in text mode' --class fedora --class gnu-linux --class gnu --class os {
\t\tlinux{efi} /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={volid} inst.text quiet
\t\tinitrd{efi} /images/pxeboot/initrd.img
\t}
\tmenuentry 'Rescue a CentOS Stream system' --class fedora --class gnu-linux --class gnu --class os {
\t\tlinux{efi} /images/pxeboot/vmlinuz inst.stage2=hd:LABEL={volid} inst.rescue quiet
\t\tinitrd{efi} /images/pxeboot/initrd.img
\t}
}
"""

UBUNTU_GRUB_CFG = """\
set timeout=30

loadfont unicode

set menu_color_normal=white/black
set menu_color_highlight=black/light-gray

menuentry "Try or Install Ubuntu Server" {
\tset gfxpayload=keep
\tlinux	/casper/vmlinuz  ---
\tinitrd	/casper/initrd
}
menuentry "Ubuntu Server with the HWE kernel" {
\tset gfxpayload=keep
\tlinux	/casper/hwe-vmlinuz  ---
\tinitrd	/casper/hwe-initrd
}
grub_platform
if [ "$grub_platform" = "efi" ]; then
menuentry 'Boot from next volume' {
\texit 1
}
menuentry 'UEFI Firmware Settings' {
\tfwsetup
}
else
menuentry 'Test memory' {
\tlinux16 /boot/memtest86+x64.bin
}
fi
"""

DEBIAN_GRUB_CFG = """\
if [ x$feature_default_font_path = xy ] ; then
   font=unicode
else
   font=$prefix/font.pf2
fi

if loadfont $font ; then
  set gfxmode=800x600
  insmod efi_gop
  insmod gfxterm
  terminal_output gfxterm
fi
insmod play
play 960 440 1 0 4 440 1
set theme=/boot/grub/theme/1
menuentry --hotkey=g 'Graphical install' {
    set background_color=black
    linux    /install.amd/vmlinuz vga=788 --- quiet
    initrd   /install.amd/gtk/initrd.gz
}
menuentry --hotkey=i 'Install' {
    set background_color=black
    linux    /install.amd/vmlinuz vga=788 --- quiet
    initrd   /install.amd/initrd.gz
}
submenu --hotkey=a 'Advanced options ...' {
    set menu_color_normal=cyan/blue
    menuentry '... Graphical expert install' {
        linux    /install.amd/vmlinuz priority=low vga=788 ---
        initrd   /install.amd/gtk/initrd.gz
    }
    menuentry '... Graphical rescue mode' {
        linux    /install.amd/vmlinuz vga=788 rescue/enable=true --- quiet
        initrd   /install.amd/gtk/initrd.gz
    }
    menuentry '... Automated install' {
        linux    /install.amd/vmlinuz auto=true priority=critical vga=788 --- quiet
        initrd   /install.amd/initrd.gz
    }
}
"""

# The stub Debian's efi.img carries: it finds the ISO by a unique file and chains to its grub.cfg.
DEBIAN_EFI_STUB = """\
search --file --set=root /.disk/id/2f4ea4c0-27d5-4d3c-b1c1-3a3a6a6e6a01
set prefix=($root)/boot/grub
source $prefix/x86_64-efi/grub.cfg
"""
DEBIAN_EFI_CHAIN = "insmod part_acorn\ninsmod part_amiga\nsource /boot/grub/grub.cfg\n"

DEBIAN_ISOLINUX = {
    "isolinux/isolinux.cfg": "# D-I config version 2.0\n"
    "# search path for the c32 support libraries (libcom32, libutil etc.)\n"
    "path \ninclude menu.cfg\ndefault vesamenu.c32\nprompt 0\ntimeout 0\n",
    "isolinux/menu.cfg": "menu hshift 4\nmenu width 70\n\nmenu title Debian GNU/Linux installer menu (BIOS mode)\n"
    "include stdmenu.cfg\ninclude gtk.cfg\ninclude txt.cfg\nmenu begin advanced\n"
    "    menu label ^Advanced options\n\tinclude stdmenu.cfg\n\tlabel mainmenu\n\t\tmenu label ^Back..\n"
    "\t\tmenu exit\n\tinclude adgtk.cfg\n\tinclude adtxt.cfg\nmenu end\n",
    "isolinux/stdmenu.cfg": "menu background splash.png\nmenu color title\t* #FFFFFFFF *\n",
    "isolinux/gtk.cfg": "default installgui\nlabel installgui\n\tmenu label ^Graphical install\n\tmenu default\n"
    "\tkernel /install.amd/vmlinuz\n\tappend vga=788 initrd=/install.amd/gtk/initrd.gz --- quiet \n",
    "isolinux/txt.cfg": "label install\n\tmenu label ^Install\n\tkernel /install.amd/vmlinuz\n"
    "\tappend vga=788 initrd=/install.amd/initrd.gz --- quiet \n",
    "isolinux/adgtk.cfg": "label expertgui\n\tmenu label Graphical expert install\n\tkernel /install.amd/vmlinuz\n"
    "\tappend priority=low vga=788 initrd=/install.amd/gtk/initrd.gz --- \n"
    "label rescuegui\n\tmenu label Graphical rescue mode\n\tkernel /install.amd/vmlinuz\n"
    "\tappend vga=788 initrd=/install.amd/gtk/initrd.gz rescue/enable=true --- quiet \n",
    "isolinux/adtxt.cfg": "label expert\n\tmenu label E^xpert install\n\tkernel /install.amd/vmlinuz\n"
    "\tappend priority=low vga=788 initrd=/install.amd/initrd.gz --- \n"
    "label auto\n\tmenu label ^Automated install\n\tkernel /install.amd/vmlinuz\n"
    "\tappend auto=true priority=critical vga=788 initrd=/install.amd/initrd.gz --- quiet \n",
}


def _eltorito_img() -> bytes:
    """GRUB's eltorito.img is cdboot.img followed by core.img; the core here is filler of a plausible size."""
    return loader("cdboot.img") + b"\x90" * (30 * 1024)


def el10_shape() -> Shape:
    bios_cfg = EL10_GRUB_CFG.replace("{volid}", EL10_VOLID).replace("{efi}", "")
    efi_cfg = EL10_GRUB_CFG.replace("{volid}", EL10_VOLID).replace("{efi}", "efi")
    efi_files = {
        "/EFI/BOOT/BOOTX64.EFI": loader("shimx64.efi"),
        "/EFI/BOOT/grubx64.efi": loader("grubx64.efi"),
        "/EFI/BOOT/GRUB.CFG": efi_cfg.encode(),  # mtools' short name only: the pyfatfs case trap
    }
    files = {
        "/images/eltorito.img": _eltorito_img(),
        "/images/efiboot.img": make_fat_image(efi_files),
        "/images/pxeboot/vmlinuz": b"EL10 kernel stand-in\n",
        "/images/pxeboot/initrd.img": _gz_cpio("init", b"#!/bin/sh\necho EL10 initrd\n"),
        "/boot/grub2/grub.cfg": bios_cfg.encode(),
        "/EFI/BOOT/BOOTX64.EFI": loader("shimx64.efi"),
        "/EFI/BOOT/grub.cfg": efi_cfg.encode(),
        "/.discinfo": b"1718000000.000000\nCentOS Stream 10\nx86_64\n",
    }
    return Shape(
        "el10", EL10_VOLID, files, "/boot.cat", "/images/eltorito.img", "grub", "/images/efiboot.img", False, "grub_mbr"
    )


def ubuntu_shape() -> Shape:
    efi_files = {"/EFI/boot/bootx64.efi": loader("shimx64.efi"), "/EFI/boot/grubx64.efi": loader("grubx64.efi")}
    files = {
        "/boot/grub/i386-pc/eltorito.img": _eltorito_img(),
        "/boot/grub/grub.cfg": UBUNTU_GRUB_CFG.encode(),
        "/boot/grub/loopback.cfg": b'menuentry "Try or Install Ubuntu Server" {\n\tset gfxpayload=keep\n'
        b"\tlinux\t/casper/vmlinuz  iso-scan/filename=${iso_path} ---\n\tinitrd\t/casper/initrd\n}\n",
        "/casper/vmlinuz": b"Ubuntu kernel stand-in\n",
        "/casper/initrd": _gz_cpio("init", b"#!/bin/sh\necho Ubuntu initrd\n"),
        "/casper/hwe-vmlinuz": b"Ubuntu HWE kernel stand-in\n",
        "/casper/hwe-initrd": _gz_cpio("init", b"#!/bin/sh\necho Ubuntu HWE initrd\n"),
        "/.disk/info": b'Ubuntu-Server 24.04.1 LTS "Noble Numbat" - Release amd64 (20240827)',
        "/efi.img": make_fat_image(efi_files),
    }
    return Shape(
        "ubuntu2404",
        UBUNTU_VOLID,
        files,
        "/boot.catalog",
        "/boot/grub/i386-pc/eltorito.img",
        "grub",
        "/efi.img",
        True,
        "grub_gpt",
    )


def debian_shape() -> Shape:
    efi_files = {
        "/EFI/boot/bootx64.efi": loader("shimx64.efi"),
        "/EFI/boot/grubx64.efi": loader("grubx64.efi"),
        "/EFI/debian/grub.cfg": DEBIAN_EFI_STUB.encode(),
    }
    files = {
        "/isolinux/isolinux.bin": loader("isolinux.bin"),
        "/isolinux/ldlinux.c32": loader("ldlinux.c32"),
        **{f"/{path}": text.encode() for path, text in DEBIAN_ISOLINUX.items()},
        "/boot/grub/efi.img": make_fat_image(efi_files),
        "/boot/grub/grub.cfg": DEBIAN_GRUB_CFG.encode(),
        "/boot/grub/x86_64-efi/grub.cfg": DEBIAN_EFI_CHAIN.encode(),
        "/install.amd/vmlinuz": b"Debian kernel stand-in\n",
        "/install.amd/initrd.gz": _gz_cpio("init", b"#!/bin/sh\necho Debian initrd\n"),
        "/install.amd/gtk/initrd.gz": _gz_cpio("init", b"#!/bin/sh\necho Debian gtk initrd\n"),
        "/.disk/id/2f4ea4c0-27d5-4d3c-b1c1-3a3a6a6e6a01": b"",
        "/.disk/info": b'Debian GNU/Linux 12.8.0 "Bookworm" - Official amd64 NETINST with firmware 20241109-11:04',
    }
    return Shape(
        "debian12",
        DEBIAN_VOLID,
        files,
        "/isolinux/boot.cat",
        "/isolinux/isolinux.bin",
        "isolinux",
        "/boot/grub/efi.img",
        False,
        "isohybrid",
    )


SHAPES: dict[str, Callable[[], Shape]] = {"el10": el10_shape, "ubuntu2404": ubuntu_shape, "debian12": debian_shape}


# --------------------------------------------------------------------------------------------------
# Mastering.


def _iso9660_clean(text: str) -> str:
    """ISO9660 level-1 d-characters: letters, digits and ``_``; anything else becomes ``_``."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


def iso9660_name(path: str, *, directory: bool) -> str:
    """An ISO9660 level-3 path for a Rock Ridge path (upper case, d-characters, ``;1`` on files)."""
    parts = []
    segments = path.strip("/").split("/")
    for index, segment in enumerate(segments):
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in segment.upper().lstrip("."))
        is_file = index == len(segments) - 1 and not directory
        if is_file:
            stem, _unused, ext = segment.upper().lstrip(".").rpartition(".")
            if not stem:
                stem, ext = ext, ""
            name = f"{_iso9660_clean(stem)[:30]}.{_iso9660_clean(ext)[:3]};1"
        parts.append(name[:31] or "_")
    return "/" + "/".join(parts)


def build_shape(name: str, dest: Path) -> Shape:
    """Write the ISO of shape ``name`` to ``dest`` and return its description."""
    require_bootloaders()
    shape = SHAPES[name]()
    master(shape, dest)
    return shape


def master(shape: Shape, dest: Path) -> None:
    """Write ``shape`` as an ISO to ``dest``, the way xorriso lays out the vendor's (the VM lane's ISO too)."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, vol_ident="CDROM", rock_ridge="1.09", joliet=3, sys_ident="LINUX")
    # xorriso writes the full volume ID in the primary descriptor and its first 16 characters in Joliet's
    # (UCS-2, 32 bytes); pycdlib's new() takes one value for both, so set them here.
    iso.pvd.volume_identifier = shape.volid.encode("ascii").ljust(32)
    iso.joliet_vd.volume_identifier = shape.volid[:16].encode("utf-16-be").ljust(32, b"\0")
    made: set[str] = set()
    for path in sorted(shape.files):
        segments = path.strip("/").split("/")
        for depth in range(1, len(segments)):
            directory = "/" + "/".join(segments[:depth])
            if directory not in made:
                iso.add_directory(
                    iso9660_name(directory, directory=True), rr_name=segments[depth - 1], joliet_path=directory
                )
                made.add(directory)
        data = shape.files[path]
        iso.add_fp(
            io.BytesIO(data), len(data), iso9660_name(path, directory=False), rr_name=segments[-1], joliet_path=path
        )
    catalog_name = shape.boot_catalog.rpartition("/")[2]
    iso.add_eltorito(
        iso9660_name(shape.bios_image, directory=False),
        bootcatfile=iso9660_name(shape.boot_catalog, directory=False),
        rr_bootcatname=catalog_name,
        joliet_bootcatfile=shape.boot_catalog,
        boot_load_size=4,
        boot_info_table=True,
    )
    iso.add_eltorito(iso9660_name(shape.efi_image, directory=False), efi=True, platform_id=0xEF)
    if shape.hybrid == "isohybrid":
        iso.add_isohybrid(efi=True, mbr_id=0x5EED1234)
    if shape.efi_hidden:
        # Only the El Torito entry keeps the image (Ubuntu's is an appended partition, in no directory).
        iso.rm_hard_link(joliet_path=shape.efi_image)
        iso.rm_hard_link(iso_path=iso9660_name(shape.efi_image, directory=False))
    with dest.open("wb") as out:
        iso.write_fp(out)
    iso.close()
    if shape.hybrid in {"grub_mbr", "grub_gpt"}:
        _grub_hybrid(dest, shape)


def _extent_of(iso_path: Path, shape: Shape, rr_path: str) -> tuple[int, int]:
    iso = pycdlib.PyCdlib()
    iso.open(str(iso_path))
    try:
        record = iso.get_record(iso_path=iso9660_name(rr_path, directory=False))
        return record.extent_location(), record.get_data_length()
    finally:
        iso.close()


def _grub_hybrid(dest: Path, shape: Shape) -> None:
    """Write what xorriso's --grub2-mbr/--grub2-boot-info leave: GRUB's MBR and partition table(s)."""
    bios_extent, _unused = _extent_of(dest, shape, shape.bios_image)
    efi_extent, efi_len = _efi_entry(dest)
    size = dest.stat().st_size
    with dest.open("r+b") as out:
        # --grub2-boot-info: the El Torito image learns where it is.
        out.seek(bios_extent * 2048 + GRUB2_BOOT_INFO_OFFSET)
        out.write(struct.pack("<Q", bios_extent * 4 + 5))
        mbr = bytearray(loader("boot_hybrid.img")[:440].ljust(512, b"\0"))
        struct.pack_into("<Q", mbr, GRUB2_MBR_BOOT_ADDR_OFFSET, bios_extent * 4 + 4)
        struct.pack_into("<I", mbr, 440, 0x2D1A6B7E)  # disk signature
        efi_start, efi_count = efi_extent * 4, (efi_len + 511) // 512
        total = size // 512
        if shape.hybrid == "grub_mbr":
            # CentOS Stream / Fedora lorax: partition 1 the whole ISO (type 0, active), 2 the EFI image.
            _mbr_part(mbr, 0, 0x80, 0x00, 0, total)
            _mbr_part(mbr, 1, 0x00, 0xEF, efi_start, efi_count)
        else:
            # Ubuntu: protective MBR (0xEE) and a GPT: 1 the ISO9660 data, 2 the EFI system partition.
            _mbr_part(mbr, 0, 0x00, 0xEE, 1, total - 1)
        mbr[510:512] = b"\x55\xaa"
        out.seek(0)
        out.write(mbr)
        if shape.hybrid == "grub_gpt":
            out.seek(size)
            out.write(bytes(GPT_BACKUP_PAD))
            total = (size + GPT_BACKUP_PAD) // 512
            _mbr_part(mbr, 0, 0x00, 0xEE, 1, total - 1)
            out.seek(0)
            out.write(mbr)
            _write_gpt(
                out, total, [(64, size // 512 - 1, "ISO9660"), (efi_start, efi_start + efi_count - 1, "Appended2")]
            )


def _efi_entry(dest: Path) -> tuple[int, int]:
    iso = pycdlib.PyCdlib()
    iso.open(str(dest))
    try:
        section = iso.eltorito_boot_catalog.sections[0]
        entry = section.section_entries[0]
        return entry.get_rba(), entry.length()
    finally:
        iso.close()


def _mbr_part(mbr: bytearray, index: int, status: int, ptype: int, start: int, count: int) -> None:  # noqa: PLR0917
    struct.pack_into("<B3sB3sII", mbr, 446 + 16 * index, status, b"\xfe\xff\xff", ptype, b"\xfe\xff\xff", start, count)


BASIC_DATA = bytes.fromhex("a2a0d0ebe5b9334487c068b6b72699c7")
EFI_SYSTEM = bytes.fromhex("28732ac11ff8d211ba4b00a0c93ec93b")


def _write_gpt(out: io.BufferedRandom, total: int, parts: list[tuple[int, int, str]]) -> None:
    """A primary GPT at LBA 1-33 and a backup at the end, written over the image's last 33 sectors."""
    entries = bytearray(128 * 128)
    for index, (first, last, name) in enumerate(parts):
        guid = struct.pack("<IHH", 0x1000 + index, 0x2000, 0x3000) + bytes(8)
        struct.pack_into(
            "<16s16sQQQ72s",
            entries,
            128 * index,
            (BASIC_DATA, EFI_SYSTEM)[index],
            guid,
            first,
            last,
            0,
            name.encode("utf-16-le"),
        )
    entries_crc = zlib.crc32(entries)
    backup_entries = total - 33
    for my_lba, alt_lba, entries_lba in ((1, total - 1, 2), (total - 1, 1, backup_entries)):
        header = bytearray(
            struct.pack(
                "<8sIIIIQQQQ16sQIII",
                b"EFI PART",
                0x00010000,
                92,
                0,
                0,
                my_lba,
                alt_lba,
                34,
                backup_entries - 1,
                bytes(range(16)),
                entries_lba,
                128,
                128,
                entries_crc,
            )
        )
        struct.pack_into("<I", header, 16, zlib.crc32(header))
        out.seek(entries_lba * 512)
        out.write(entries)
        out.seek(my_lba * 512)
        out.write(bytes(header).ljust(512, b"\0"))
