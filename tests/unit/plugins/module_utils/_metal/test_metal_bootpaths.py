"""Boot path editors (GRUB, ISOLINUX), stub-chain following, and the FAT image editor."""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._metal import iso_bootpaths as bp
from ansible_collections.metalplane.inference.plugins.module_utils._metal import iso_fat
from support import vendor_isos as shapes

EL_EDIT = bp.KernelEdit(add_args=("inst.ks=hd:LABEL=X:/ks.cfg",), remove_args=("rd.live.check",))
UBUNTU_EDIT = bp.KernelEdit(add_args=("autoinstall", "ds=nocloud;s=/cdrom/nocloud/"))
DEBIAN_EDIT = bp.KernelEdit(add_args=("auto=true", "priority=critical"), extra_initrd="/preseed.img")

EL_GRUB = shapes.EL10_GRUB_CFG.replace("{volid}", shapes.EL10_VOLID).replace("{efi}", "efi")


@pytest.mark.parametrize(
    ("text", "edit", "titles", "kernel_line", "initrd_line"),
    [
        (
            EL_GRUB,
            EL_EDIT,
            [
                "Install CentOS Stream 10",
                "Test this media & install CentOS Stream 10",
                "Install CentOS Stream 10 in text mode",
            ],
            "\tlinuxefi /images/pxeboot/vmlinuz inst.stage2=hd:LABEL=CentOS-Stream-10-BaseOS-x86_64 quiet "
            "inst.ks=hd:LABEL=X:/ks.cfg",
            "\tinitrdefi /images/pxeboot/initrd.img",
        ),
        (
            shapes.UBUNTU_GRUB_CFG,
            UBUNTU_EDIT,
            ["Try or Install Ubuntu Server", "Ubuntu Server with the HWE kernel"],
            "\tlinux\t/casper/vmlinuz autoinstall ds=nocloud\\;s=/cdrom/nocloud/ ---",
            "\tinitrd\t/casper/initrd",
        ),
        (
            shapes.DEBIAN_GRUB_CFG,
            DEBIAN_EDIT,
            ["Graphical install", "Install", "... Graphical expert install", "... Automated install"],
            "    linux    /install.amd/vmlinuz vga=788 auto=true priority=critical --- quiet",
            "    initrd   /install.amd/gtk/initrd.gz /preseed.img",
        ),
    ],
)
def test_grub_editor(text: str, edit: bp.KernelEdit, titles: list[str], kernel_line: str, initrd_line: str) -> None:
    result = bp.edit_grub_cfg(text, edit)
    assert result.entries == titles
    assert result.default == "0"
    lines = result.text.splitlines()
    assert kernel_line in lines
    assert initrd_line in lines
    # One default and timeout, ours, at the top; the menu's own (set default="1", timeout=60/30) are gone.
    assert lines[:4] == [bp.EDIT_MARKER, 'set default="0"', "set timeout_style=hidden", "set timeout=0"]
    assert sum(1 for line in lines if line.strip().startswith(("set default=", "set timeout="))) == 2
    assert "rd.live.check" not in result.text
    # Rescue and memory-test entries are left alone.
    for line in lines:
        if "inst.rescue" in line or "rescue/enable=true" in line or "memtest" in line:
            assert not any(arg in line for arg in ("inst.ks", "auto=true", "autoinstall"))


def test_grub_editor_counts_entries_inside_submenus() -> None:
    text = (
        "submenu 'More' {\n  menuentry 'memtest' {\n    linux16 /memtest\n  }\n  menuentry 'Install' {\n"
        "    linux /vmlinuz quiet\n    initrd /initrd\n  }\n}\n"
    )
    result = bp.edit_grub_cfg(text, EL_EDIT)
    assert result.default == "0>1"


def test_grub_editor_refuses_a_menu_without_installer_entries() -> None:
    with pytest.raises(bp.BootPathError):
        bp.edit_grub_cfg("menuentry 'Firmware' {\n  fwsetup\n}\n", EL_EDIT)


def test_editing_twice_is_the_same_as_once() -> None:
    once = bp.edit_args(["vga=788", "---", "quiet"], DEBIAN_EDIT)
    assert bp.edit_args(once, DEBIAN_EDIT) == once == ["vga=788", "auto=true", "priority=critical", "---", "quiet"]
    assert bp.edit_args(["priority=low", "---"], DEBIAN_EDIT) == ["auto=true", "priority=critical", "---"]


def test_isolinux_editor_edits_every_included_installer_label() -> None:
    files = {f"/{path}": text for path, text in shapes.DEBIAN_ISOLINUX.items()}
    edited, result = bp.edit_isolinux(files, "/isolinux/isolinux.cfg", DEBIAN_EDIT)
    assert result.entries == ["installgui", "install", "expertgui", "expert", "auto"]
    assert result.default == "installgui"
    top = edited["/isolinux/isolinux.cfg"]
    assert top.endswith("default installgui\nprompt 0\ntimeout 1\n")
    assert "default vesamenu.c32" not in top
    assert "timeout 0" not in top
    assert "\tappend vga=788 initrd=/install.amd/initrd.gz,/preseed.img auto=true priority=critical --- quiet" in (
        edited["/isolinux/txt.cfg"].splitlines()
    )
    assert "menu default" not in edited["/isolinux/gtk.cfg"]
    rescue = next(line for line in edited["/isolinux/adgtk.cfg"].splitlines() if "rescue/enable=true" in line)
    assert "preseed.img" not in rescue
    assert "auto=true" not in rescue


def test_isolinux_separate_initrd_directive_gets_the_extra_initrd() -> None:
    files = {"/isolinux.cfg": "label linux\n  kernel /vmlinuz\n  initrd /initrd.gz\n  append quiet ---\n"}
    edited, _unused = bp.edit_isolinux(files, "/isolinux.cfg", DEBIAN_EDIT)
    assert "  initrd /initrd.gz,/preseed.img" in edited["/isolinux.cfg"].splitlines()


@pytest.mark.parametrize(
    ("text", "target"),
    [
        (shapes.DEBIAN_EFI_STUB, "/boot/grub/x86_64-efi/grub.cfg"),
        (shapes.DEBIAN_EFI_CHAIN, "/boot/grub/grub.cfg"),
        (
            "search --set=root --file /.disk/info\nset prefix=($root)/boot/grub\nconfigfile $prefix/grub.cfg\n",
            "/boot/grub/grub.cfg",
        ),
        ("insmod part_gpt\n", None),
    ],
)
def test_grub_chain_target(text: str, target: str | None) -> None:
    assert bp.grub_chain_target(text) == target


def test_uefi_paths_follow_the_efi_image_stub_to_the_iso_menu() -> None:
    iso = {
        "/boot/grub/grub.cfg": shapes.DEBIAN_GRUB_CFG,
        "/boot/grub/x86_64-efi/grub.cfg": shapes.DEBIAN_EFI_CHAIN,
    }
    paths = bp.uefi_paths({"/EFI/debian/grub.cfg": shapes.DEBIAN_EFI_STUB}, iso.get)
    assert [(p.where, p.config, p.via) for p in paths] == [
        ("iso", "/boot/grub/grub.cfg", ()),
        ("iso", "/boot/grub/grub.cfg", ("efi_image:/EFI/debian/grub.cfg", "/boot/grub/x86_64-efi/grub.cfg")),
    ]


@pytest.mark.parametrize(
    ("path", "image", "loader"),
    [
        ("/isolinux/isolinux.bin", b"\0" * 64, "isolinux"),
        ("/images/eltorito.img", b"\0" * 64, "grub"),
        (None, b"xx ISOLINUX 6.04 xx", "isolinux"),
    ],
)
def test_bios_loader(path: str | None, image: bytes, loader: str) -> None:
    assert bp.bios_loader(path, image) == loader


@pytest.mark.parametrize(
    ("loader", "image", "existing", "config"),
    [
        ("grub", "/boot/grub/i386-pc/eltorito.img", {"/boot/grub/grub.cfg"}, "/boot/grub/grub.cfg"),
        ("grub", "/images/eltorito.img", {"/boot/grub2/grub.cfg", "/EFI/BOOT/grub.cfg"}, "/boot/grub2/grub.cfg"),
        ("isolinux", "/isolinux/isolinux.bin", {"/isolinux/isolinux.cfg"}, "/isolinux/isolinux.cfg"),
        ("isolinux", "/boot/x/isolinux.bin", {"/isolinux/isolinux.cfg"}, "/isolinux/isolinux.cfg"),
    ],
)
def test_bios_config(loader: str, image: str, existing: set[str], config: str) -> None:
    assert bp.bios_config(loader, image, existing.__contains__) == config


# ------------------------------------------------------------------------------------------------
# FAT (El Torito EFI image)


@pytest.fixture(scope="module")
def fat_image() -> bytes:
    return shapes.make_fat_image(
        {
            "/EFI/BOOT/BOOTX64.EFI": b"\x4d\x5a" * 3000,
            "/EFI/BOOT/GRUB.CFG": b"old config\n",
            "/EFI/BOOT/notes.txt": b"x",
        },
        size=1024 * 1024,
    )


def test_fat_names_match_ignoring_case(fat_image: bytes) -> None:
    found = iso_fat.find_files(fat_image, "grub.cfg")
    assert [(f.path, f.data) for f in found] == [("/EFI/BOOT/GRUB.CFG", b"old config\n")]
    assert iso_fat.read_file(fat_image, "/efi/boot/grub.cfg") == b"old config\n"


@pytest.mark.parametrize("size", [5, 4096, 20000])
def test_fat_replace_keeps_the_image_size_and_other_files(fat_image: bytes, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    edited = iso_fat.replace_files(fat_image, {"/efi/boot/grub.cfg": data})
    assert len(edited) == len(fat_image)
    assert iso_fat.read_file(edited, "/EFI/BOOT/GRUB.CFG") == data
    assert iso_fat.read_file(edited, "/EFI/BOOT/BOOTX64.EFI") == b"\x4d\x5a" * 3000
    assert iso_fat.replace_files(fat_image, {"/efi/boot/grub.cfg": data}) == edited  # reproducible
    again = iso_fat.replace_files(edited, {"/EFI/BOOT/GRUB.CFG": b"short\n"})  # shrink frees clusters
    assert iso_fat.read_file(again, "/EFI/BOOT/GRUB.CFG") == b"short\n"


def test_fat_replace_of_a_missing_file_fails(fat_image: bytes) -> None:
    with pytest.raises(iso_fat.FatImageError):
        iso_fat.replace_files(fat_image, {"/EFI/BOOT/absent.cfg": b"x"})


def test_fat_refuses_what_is_not_fat() -> None:
    with pytest.raises(iso_fat.FatImageError):
        iso_fat.find_files(b"\0" * 4096, "grub.cfg")
