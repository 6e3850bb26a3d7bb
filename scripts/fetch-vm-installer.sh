#!/usr/bin/env bash
# Fetch what the VM lane's Debian installer ISO is built from into .build/metal-vm/installer/.
#
# Why: the real-boot lane (docs/testing/metal-vm.md) boots an ISO shaped like Debian 12's netinst ISO,
# built from Debian's own packages because the netinst ISO itself is not reachable here: the netboot
# installer (debian-installer-12-netboot-amd64: the installer kernel and its initrd, which fetches the rest
# of the installer from the Debian mirror, like the netinst), ISOLINUX and its COM32 modules for BIOS,
# Microsoft-signed shim and Debian's signed GRUB *CD* image (gcdx64.efi, the one Debian puts in the
# netinst's efi.img) for UEFI, and the installer's GRUB font. `apt-get download` needs no root;
# `dpkg-deb -x` unpacks without installing. Idempotent: does nothing when DEST already holds them.
#
#   scripts/fetch-vm-installer.sh [DEST]   (default: <repo>/.build/metal-vm/installer)
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-"$repo_root/.build/metal-vm/installer"}
stamp="$dest/.complete"
DI=usr/lib/debian-installer/images/12/amd64/text
# file kept -> path inside the unpacked packages
FILES=(
  "vmlinuz=$DI/debian-installer/amd64/linux"
  "initrd.gz=$DI/debian-installer/amd64/initrd.gz"
  "version.info=$DI/version.info"
  "font.pf2=$DI/debian-installer/amd64/grub/font.pf2"
  "isolinux.bin=usr/lib/ISOLINUX/isolinux.bin"
  "ldlinux.c32=usr/lib/syslinux/modules/bios/ldlinux.c32"
  "vesamenu.c32=usr/lib/syslinux/modules/bios/vesamenu.c32"
  "libcom32.c32=usr/lib/syslinux/modules/bios/libcom32.c32"
  "libutil.c32=usr/lib/syslinux/modules/bios/libutil.c32"
  "gcdx64.efi=usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed"
  "shimx64.efi=usr/lib/shim/shimx64.efi.signed"
)
PACKAGES=(debian-installer-12-netboot-amd64 isolinux syslinux-common grub-efi-amd64-signed shim-signed)

if [ -f "$stamp" ]; then
  echo "vm installer files already at $dest"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "fetch-vm-installer: needs apt-get and dpkg-deb (a Debian-family machine)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && apt-get download "${PACKAGES[@]}" >/dev/null 2>&1); then
  if [ "$(id -u)" = 0 ]; then
    apt-get update >/dev/null 2>&1 || true
  fi
  (cd "$work" && apt-get download "${PACKAGES[@]}" >/dev/null) \
    || { echo "fetch-vm-installer: apt-get download failed (${PACKAGES[*]})" >&2; exit 1; }
fi

mkdir "$work/root" "$work/out"
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
  echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >>"$work/out/VERSIONS"
done
for entry in "${FILES[@]}"; do
  name=${entry%%=*}
  [ -f "$work/root/${entry#*=}" ] || { echo "fetch-vm-installer: ${entry#*=} not in the downloaded packages" >&2; exit 1; }
  cp "$work/root/${entry#*=}" "$work/out/$name"
done
touch "$work/out/.complete"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$work/out" "$dest"
echo "fetched the VM lane's installer files into $dest: $(paste -sd ' ' "$dest/VERSIONS")"
