#!/usr/bin/env bash
# Fetch the boot loaders the vendor-shaped test ISOs are built from into .build/bootloaders/.
#
# Why: the boot_iso tests need ISOs whose El Torito catalog, boot loaders and volume-ID conventions
# match the real EL 10, Ubuntu 24.04 and Debian 12 installer ISOs, which cannot be downloaded here
# (docs/modules/metal.md says which real ISO each shape copies). Debian's own packages ship the same
# loaders: ISOLINUX (isolinux.bin, isohdpfx.bin, ldlinux.c32), GRUB for BIOS (cdboot.img, the El Torito
# head of GRUB's eltorito.img, and boot_hybrid.img, GRUB's hybrid MBR), Microsoft-signed shim and
# Debian-signed GRUB for UEFI. `apt-get download` needs no root; `dpkg-deb -x` unpacks without installing.
# Only the files the shapes use are kept. Idempotent: does nothing when DEST already holds them.
#
#   scripts/fetch-bootloaders.sh [DEST]   (default: <repo>/.build/bootloaders)
#
# Without apt (not a Debian-family machine) it fails with a message; the tests that need the loaders
# then skip, naming `make bootloaders`.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-"$repo_root/.build/bootloaders"}
stamp="$dest/.complete"
# file kept -> path inside the unpacked packages; a | separates alternatives (first found wins).
FILES=(
  "isolinux.bin=usr/lib/ISOLINUX/isolinux.bin"
  "isohdpfx.bin=usr/lib/ISOLINUX/isohdpfx.bin"
  "ldlinux.c32=usr/lib/syslinux/modules/bios/ldlinux.c32"
  "cdboot.img=usr/lib/grub/i386-pc/cdboot.img"
  "boot_hybrid.img=usr/lib/grub/i386-pc/boot_hybrid.img"
  "grubx64.efi=usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed|usr/lib/grub/x86_64-efi/monolithic/grubx64.efi"
  "shimx64.efi=usr/lib/shim/shimx64.efi.signed"
)

if [ -f "$stamp" ]; then
  echo "boot loaders already at $dest"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "fetch-bootloaders: needs apt-get and dpkg-deb (a Debian-family machine)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download() {  # download PKG...: apt-get download into $work, run apt-get update once first if root and it fails
  (cd "$work" && apt-get download "$@" >/dev/null 2>&1) && return 0
  if [ "$(id -u)" = 0 ]; then
    apt-get update >/dev/null 2>&1 || true
    (cd "$work" && apt-get download "$@" >/dev/null)
  else
    return 1
  fi
}
download isolinux syslinux-common grub-pc-bin shim-signed \
  || { echo "fetch-bootloaders: apt-get download failed (isolinux syslinux-common grub-pc-bin shim-signed)" >&2; exit 1; }
download grub-efi-amd64-signed || download grub-efi-amd64-bin \
  || { echo "fetch-bootloaders: apt-get download failed (grub-efi-amd64-signed or grub-efi-amd64-bin)" >&2; exit 1; }

mkdir "$work/root" "$work/out"
for deb in "$work"/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
  echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >>"$work/out/VERSIONS"
done
for entry in "${FILES[@]}"; do
  name=${entry%%=*}
  found=""
  IFS='|' read -r -a alternatives <<<"${entry#*=}"
  for candidate in "${alternatives[@]}"; do
    if [ -f "$work/root/$candidate" ]; then found="$work/root/$candidate"; break; fi
  done
  [ -n "$found" ] || { echo "fetch-bootloaders: ${entry#*=} not in the downloaded packages" >&2; exit 1; }
  cp "$found" "$work/out/$name"
done
touch "$work/out/.complete"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$work/out" "$dest"
echo "fetched boot loaders into $dest: $(paste -sd ' ' "$dest/VERSIONS")"
