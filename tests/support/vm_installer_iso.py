"""The VM lane's Debian 12 installer ISO: the netinst's layout, built from Debian's netboot installer package.

Why: the real-boot lane (docs/testing/metal-vm.md) must boot what ``boot_iso`` makes of a *vendor* ISO, and
the Debian netinst ISO cannot be downloaded here, while Debian's packages can
(``scripts/fetch-vm-installer.sh``). So this builds an ISO with the netinst's El Torito catalog, paths, volume
ID convention, boot menus and isohybrid MBR (the ``debian12`` shape of ``support.vendor_isos``, which
docs/modules/metal.md compares with the real netinst), holding the real installer: the netboot kernel and
initrd (the netinst's text installer fetches the rest of itself from the mirror the same way), real ISOLINUX
for BIOS, and for UEFI an ``efi.img`` with Microsoft-signed shim and Debian's signed GRUB CD image
(``gcdx64.efi``, the one Debian's netinst carries), which finds the ISO by ``/.disk/info`` and follows the
``/EFI/debian/grub.cfg`` stub to ``/boot/grub/grub.cfg``.

What differs from the real netinst, on purpose (each said in docs/testing/metal-vm.md):

- no graphical installer (``install.amd/gtk``): the lane watches the serial console, so the first entry is the
  text installer's ``Install`` (on the netinst it is ``Graphical install``);
- every entry carries ``console=ttyS0,115200n8`` (after ``---``, so the installed system gets it too) and no
  ``quiet``, ISOLINUX also talks on the serial port (``serial 0 115200``): a server's serial-over-LAN console,
  which is all the lane can read; and ``DEBCONF_DEBUG=developer`` (installer only), so the installer's log
  says which question got which answer;
- no ``pool/`` of packages and no firmware: the netboot installer installs from the mirror.

``build(installer_dir, cache_dir)`` writes the ISO once per input set (its name carries a digest of the inputs)
and returns its path; ``layout(installer_dir)`` is the shape, for the unit tests.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from support.collection import REPO_ROOT
from support.vendor_isos import DEBIAN_EFI_CHAIN, DEBIAN_EFI_STUB, Shape, make_fat_image, master

INSTALLER_DIR = REPO_ROOT / ".build" / "metal-vm" / "installer"  # scripts/fetch-vm-installer.sh
ISO_CACHE = REPO_ROOT / ".build" / "metal-vm"
# The files scripts/fetch-vm-installer.sh leaves (its .complete stamp says all are there).
INSTALLER_FILES = (
    "vmlinuz",
    "initrd.gz",
    "version.info",
    "font.pf2",
    "isolinux.bin",
    "ldlinux.c32",
    "vesamenu.c32",
    "libcom32.c32",
    "libutil.c32",
    "gcdx64.efi",
    "shimx64.efi",
)
# xorriso writes the netinst's volume ID as "Debian <version> amd64 n"; the netboot package carries no point
# release, so the lane's ISO says "12".
VOLUME_ID = "Debian 12 amd64 n"
# The kernel's console on the first serial port: what the lane reads (QEMU's -serial).
SERIAL_CONSOLE = "console=ttyS0,115200n8"
# cdebconf's protocol trace into the installer's log (every question asked and its answer): what the lane reads
# to tell which network the installer configured and whether it showed a question. Before ``---``: the installed
# system does not get it.
INSTALLER_DEBUG = "DEBCONF_DEBUG=developer"
# The netinst's /.disk/id/<uuid>: the efi.img stub finds the ISO by this file (support.vendor_isos).
DISK_ID_FILE = "/.disk/id/2f4ea4c0-27d5-4d3c-b1c1-3a3a6a6e6a01"
LAYOUT_VERSION = "1"  # bump when the layout below changes: the cached ISO's name changes with it

# The netinst's text-installer menus (debian-cd's isolinux templates for bookworm), kernel and initrd under
# /install.amd/, the serial console added.
ISOLINUX = {
    "isolinux/isolinux.cfg": "# D-I config version 2.0\n"
    "# search path for the c32 support libraries (libcom32, libutil etc.)\n"
    "serial 0 115200\n"
    "path \ninclude menu.cfg\ndefault vesamenu.c32\nprompt 0\ntimeout 0\n",
    "isolinux/menu.cfg": "menu hshift 4\nmenu width 70\n\nmenu title Debian GNU/Linux installer menu (BIOS mode)\n"
    "include stdmenu.cfg\ninclude txt.cfg\nmenu begin advanced\n"
    "    menu label ^Advanced options\n\tinclude stdmenu.cfg\n\tlabel mainmenu\n\t\tmenu label ^Back..\n"
    "\t\tmenu exit\n\tinclude adtxt.cfg\nmenu end\n",
    "isolinux/stdmenu.cfg": "menu color title\t* #FFFFFFFF *\n",
    "isolinux/txt.cfg": "default install\nlabel install\n\tmenu label ^Install\n\tmenu default\n"
    "\tkernel /install.amd/vmlinuz\n"
    f"\tappend vga=788 {INSTALLER_DEBUG} initrd=/install.amd/initrd.gz --- {SERIAL_CONSOLE}\n",
    "isolinux/adtxt.cfg": "label expert\n\tmenu label E^xpert install\n\tkernel /install.amd/vmlinuz\n"
    f"\tappend priority=low vga=788 {INSTALLER_DEBUG} initrd=/install.amd/initrd.gz --- {SERIAL_CONSOLE}\n"
    "label rescue\n\tmenu label ^Rescue mode\n\tkernel /install.amd/vmlinuz\n"
    f"\tappend vga=788 {INSTALLER_DEBUG} initrd=/install.amd/initrd.gz rescue/enable=true --- {SERIAL_CONSOLE}\n"
    "label auto\n\tmenu label ^Automated install\n\tkernel /install.amd/vmlinuz\n"
    "\tappend auto=true priority=critical vga=788 "
    f"{INSTALLER_DEBUG} initrd=/install.amd/initrd.gz --- {SERIAL_CONSOLE}\n",
}
GRUB_CFG = f"""\
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
set menu_color_normal=cyan/blue
set menu_color_highlight=white/blue
menuentry --hotkey=i 'Install' {{
    set background_color=black
    linux    /install.amd/vmlinuz vga=788 {INSTALLER_DEBUG} --- {SERIAL_CONSOLE}
    initrd   /install.amd/initrd.gz
}}
submenu --hotkey=a 'Advanced options ...' {{
    set menu_color_normal=cyan/blue
    menuentry '... Expert install' {{
        linux    /install.amd/vmlinuz priority=low vga=788 {INSTALLER_DEBUG} --- {SERIAL_CONSOLE}
        initrd   /install.amd/initrd.gz
    }}
    menuentry '... Rescue mode' {{
        linux    /install.amd/vmlinuz vga=788 {INSTALLER_DEBUG} rescue/enable=true --- {SERIAL_CONSOLE}
        initrd   /install.amd/initrd.gz
    }}
    menuentry '... Automated install' {{
        linux    /install.amd/vmlinuz auto=true priority=critical vga=788 {INSTALLER_DEBUG} --- {SERIAL_CONSOLE}
        initrd   /install.amd/initrd.gz
    }}
}}
"""


class InstallerFilesMissing(RuntimeError):
    """The netboot installer's files are not there: ``make metal-vm-installer`` fetches them."""


def installer_version(installer_dir: Path) -> str:
    """The installer build, as the netboot package's version.info says (``20230607+deb12u15``)."""
    for line in (installer_dir / "version.info").read_text().splitlines():
        if line.startswith("Installer build:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def check_installer_dir(installer_dir: Path) -> None:
    missing = [name for name in INSTALLER_FILES if not (installer_dir / name).is_file()]
    if missing or not (installer_dir / ".complete").is_file():
        raise InstallerFilesMissing(
            f"the Debian netboot installer files are not at {installer_dir} ({', '.join(missing) or '.complete'}): "
            "run `make metal-vm-installer` (scripts/fetch-vm-installer.sh)"
        )


def layout(installer_dir: Path) -> Shape:
    """The ISO's files, El Torito entries and hybrid style (``support.vendor_isos.Shape``)."""
    check_installer_dir(installer_dir)

    def read(name: str) -> bytes:
        return (installer_dir / name).read_bytes()

    efi_files = {
        "/EFI/boot/bootx64.efi": read("shimx64.efi"),
        "/EFI/boot/grubx64.efi": read("gcdx64.efi"),  # shim starts grubx64.efi from its own directory
        "/EFI/debian/grub.cfg": DEBIAN_EFI_STUB.encode(),
    }
    version = installer_version(installer_dir)
    files = {
        "/isolinux/isolinux.bin": read("isolinux.bin"),
        **{f"/isolinux/{name}": read(name) for name in ("ldlinux.c32", "vesamenu.c32", "libcom32.c32", "libutil.c32")},
        **{f"/{path}": text.encode() for path, text in ISOLINUX.items()},
        "/boot/grub/efi.img": make_fat_image(efi_files),
        "/boot/grub/grub.cfg": GRUB_CFG.encode(),
        "/boot/grub/font.pf2": read("font.pf2"),
        "/boot/grub/x86_64-efi/grub.cfg": DEBIAN_EFI_CHAIN.encode(),
        "/install.amd/vmlinuz": read("vmlinuz"),
        "/install.amd/initrd.gz": read("initrd.gz"),
        DISK_ID_FILE: b"",
        "/.disk/info": f'Debian GNU/Linux 12 "Bookworm" - Official amd64 NETINST (netboot {version})'.encode(),
    }
    return Shape(
        "debian12-netboot",
        VOLUME_ID,
        files,
        "/isolinux/boot.cat",
        "/isolinux/isolinux.bin",
        "isolinux",
        "/boot/grub/efi.img",
        False,
        "isohybrid",
    )


def inputs_digest(installer_dir: Path) -> str:
    """A digest of everything the ISO is made of: the installer files, this layout's version and texts."""
    digest = hashlib.sha256(LAYOUT_VERSION.encode())
    for name in INSTALLER_FILES:
        digest.update(name.encode() + b"\0" + (installer_dir / name).read_bytes())
    for text in (*ISOLINUX.values(), GRUB_CFG, DEBIAN_EFI_STUB, DEBIAN_EFI_CHAIN):
        digest.update(text.encode())
    return digest.hexdigest()[:16]


def build(installer_dir: Path = INSTALLER_DIR, cache_dir: Path = ISO_CACHE) -> Path:
    """The lane's vendor ISO, built once into ``cache_dir`` (its name changes with its inputs)."""
    check_installer_dir(installer_dir)
    dest = cache_dir / f"debian12-netboot-{installer_version(installer_dir)}-{inputs_digest(installer_dir)}.iso"
    if dest.is_file():
        return dest
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    try:
        master(layout(installer_dir), partial)
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    return dest
