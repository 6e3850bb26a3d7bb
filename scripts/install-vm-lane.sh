#!/usr/bin/env bash
# Install what the real-boot VM lane needs (docs/testing/metal-vm.md): QEMU for x86-64, qemu-img and
# the OVMF UEFI firmware, all Debian packages.
#
# Why a script of its own: the lane is opt-in and the packages need root, so `make test` never
# installs them; `make test-metal-vm` runs this first. As root it installs what is missing (apt-get
# update only when the first try fails, as scripts/fetch-bootloaders.sh does); as another user it
# installs nothing and, when something is missing, fails naming the command to run as root.
# Idempotent: does nothing when every tool is already there.
#
#   scripts/install-vm-lane.sh          install (root) or check (anyone)
#   scripts/install-vm-lane.sh --check  only check; exit 1 naming the install command when missing
#
# VM_LANE_ROOT (tests only) is prepended to every path checked.
set -euo pipefail

root=${VM_LANE_ROOT:-}

# Debian package -> a file it installs that the lane uses (the check that the package is there).
PACKAGES=(
  "qemu-system-x86=/usr/bin/qemu-system-x86_64"
  "qemu-utils=/usr/bin/qemu-img"
  "ovmf=/usr/share/OVMF/OVMF_CODE_4M.fd"
)

missing=()
for entry in "${PACKAGES[@]}"; do
  [ -e "$root${entry#*=}" ] || missing+=("${entry%%=*}")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "vm lane: qemu-system-x86, qemu-utils and ovmf are installed"
  exit 0
fi

install_cmd="sudo scripts/install-vm-lane.sh   (apt-get install --no-install-recommends ${missing[*]})"
if [ "${1:-}" = "--check" ] || [ "$(id -u)" != 0 ]; then
  echo "vm lane: missing ${missing[*]}; install them as root with: $install_cmd" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "vm lane: needs apt-get (a Debian-family machine) to install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
  apt-get update >/dev/null
  apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
}
for entry in "${PACKAGES[@]}"; do
  [ -e "$root${entry#*=}" ] || { echo "vm lane: ${entry%%=*} installed but ${entry#*=} is absent" >&2; exit 1; }
done
echo "vm lane: installed ${missing[*]}"
