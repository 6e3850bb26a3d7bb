"""The VM lane's installer ISO builder: the netinst's layout around Debian's netboot installer.

Why: the lane boots this ISO after ``boot_iso`` edited it, so its layout must be the netinst's (catalog, paths,
stub chain, volume ID) and every boot entry must talk on the serial console the lane reads. The builder runs
here on stand-in files (no download): the real ones only change the bytes, not the layout.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pycdlib
import pytest
from pyfatfs.PyFat import PyFat

from support import vm_installer_iso
from support.vm_installer_iso import (
    DISK_ID_FILE,
    INSTALLER_FILES,
    SERIAL_CONSOLE,
    VOLUME_ID,
    InstallerFilesMissing,
    build,
    layout,
)

ISOLINUX_MAGIC_OFFSET = 0x40  # pycdlib's isohybrid checks ISOLINUX's boot info signature here
ISOLINUX_MAGIC = 0x7078C0FB


def _installer_dir(root: Path) -> Path:
    directory = root / "installer"
    directory.mkdir()
    for name in INSTALLER_FILES:
        data = f"{name} stand-in\n".encode()
        if name == "isolinux.bin":
            data = bytearray(2048)
            struct.pack_into("<I", data, ISOLINUX_MAGIC_OFFSET, ISOLINUX_MAGIC)
            data = bytes(data)
        (directory / name).write_bytes(data)
    (directory / "version.info").write_text("Debian version:  12 (bookworm)\nInstaller build: 20230607+deb12u15\n")
    (directory / ".complete").touch()
    return directory


def _kernel_lines(shape_files: dict[str, bytes]) -> list[str]:
    lines = []
    for path in ("/isolinux/txt.cfg", "/isolinux/adtxt.cfg", "/boot/grub/grub.cfg"):
        text = shape_files[path].decode()
        lines += [line.strip() for line in text.splitlines() if "vmlinuz" in line or "append" in line]
    return [line for line in lines if line.startswith(("append", "linux"))]


def test_layout_is_the_netinst_text_installer(tmp_path: Path) -> None:
    shape = layout(_installer_dir(tmp_path))
    assert (shape.boot_catalog, shape.bios_image, shape.bios_loader) == (
        "/isolinux/boot.cat",
        "/isolinux/isolinux.bin",
        "isolinux",
    )
    assert (shape.efi_image, shape.efi_hidden, shape.hybrid) == ("/boot/grub/efi.img", False, "isohybrid")
    assert shape.volid == VOLUME_ID
    assert shape.files["/install.amd/vmlinuz"] == b"vmlinuz stand-in\n"
    assert shape.files["/install.amd/initrd.gz"] == b"initrd.gz stand-in\n"
    assert not any("gtk" in path for path in shape.files)  # no graphical installer: the lane reads serial
    assert DISK_ID_FILE in shape.files  # what the efi.img stub searches for
    assert b"20230607+deb12u15" in shape.files["/.disk/info"]  # gcdx64's embedded config looks for it


def test_every_entry_talks_on_the_serial_console(tmp_path: Path) -> None:
    shape = layout(_installer_dir(tmp_path))
    lines = _kernel_lines(shape.files)
    assert len(lines) == 8  # 4 ISOLINUX labels, 4 GRUB entries
    for line in lines:
        assert line.endswith(f"--- {SERIAL_CONSOLE}"), line
        assert "quiet" not in line  # the kernel's messages are the lane's first evidence
    assert "serial 0 115200" in shape.files["/isolinux/isolinux.cfg"].decode()
    # The text installer is the first entry, as the graphical one is on the real netinst.
    menu = shape.files["/isolinux/menu.cfg"].decode()
    assert menu.index("include txt.cfg") < menu.index("include adtxt.cfg")
    grub = shape.files["/boot/grub/grub.cfg"].decode()
    assert grub.index("'Install'") < grub.index("Advanced options")


def test_efi_image_holds_shim_the_cd_grub_and_the_stub(tmp_path: Path) -> None:
    shape = layout(_installer_dir(tmp_path))
    image = tmp_path / "efi.img"
    image.write_bytes(shape.files["/boot/grub/efi.img"])
    fat = PyFat()
    fat.open(str(image))
    try:
        found = {}
        wanted = ((["EFI", "boot"], "bootx64.efi"), (["EFI", "boot"], "grubx64.efi"), (["EFI", "debian"], "grub.cfg"))
        for directory, path in wanted:
            entry = fat.root_dir
            for part in directory:
                entry = entry.get_entry(part)
            child = entry.get_entry(path)
            found[f"{'/'.join(directory)}/{path}"] = fat.read_cluster_contents(child.get_cluster())[: child.filesize]
    finally:
        fat.close()
    assert found["EFI/boot/bootx64.efi"] == b"shimx64.efi stand-in\n"
    assert found["EFI/boot/grubx64.efi"] == b"gcdx64.efi stand-in\n"  # the CD image, not the installed-system one
    assert b"set prefix=($root)/boot/grub" in found["EFI/debian/grub.cfg"]


def test_build_masters_once_and_names_its_inputs(tmp_path: Path) -> None:
    installer = _installer_dir(tmp_path)
    first = build(installer, tmp_path / "cache")
    assert build(installer, tmp_path / "cache") == first  # cached
    assert first.name.startswith("debian12-netboot-20230607+deb12u15-")
    iso = pycdlib.PyCdlib()
    iso.open(str(first))
    try:
        assert iso.pvd.volume_identifier.decode().strip() == VOLUME_ID
        data = io.BytesIO()
        iso.get_file_from_iso_fp(data, rr_path="/install.amd/initrd.gz")
        assert data.getvalue() == b"initrd.gz stand-in\n"
        assert len(iso.eltorito_boot_catalog.sections) == 1  # BIOS initial entry + one EFI section
    finally:
        iso.close()
    (installer / "initrd.gz").write_bytes(b"another installer build\n")
    assert build(installer, tmp_path / "cache") != first  # new inputs, new ISO
    assert not list((tmp_path / "cache").glob(".*partial"))


@pytest.mark.parametrize("missing", ["initrd.gz", "gcdx64.efi", ".complete"])
def test_missing_installer_files_name_the_make_target(tmp_path: Path, missing: str) -> None:
    installer = _installer_dir(tmp_path)
    (installer / missing).unlink()
    with pytest.raises(InstallerFilesMissing, match=r"make metal-vm-installer"):
        build(installer, tmp_path / "cache")


def test_default_locations_are_under_build() -> None:
    assert vm_installer_iso.INSTALLER_DIR.parts[-3:] == (".build", "metal-vm", "installer")
