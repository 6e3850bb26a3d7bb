#!/usr/bin/env bash
# Capture read-only NVIDIA driver probes as parser fixtures (issue "node software": the nvidia_driver role's
# probes). Run it only on a machine that already has a real NVIDIA driver and GPU; it never installs,
# unloads or reconfigures anything: every command below only reads.
#
#   scripts/capture-nvidia-fixtures.sh OUT_DIR
#
# OUT_DIR gets one file per probe (the names tests/unit/fixtures/nvidia/README.md lists) plus source.txt naming
# the driver, GPU, kernel and OS they came from. Zero <serial> and <uuid> before committing, and add expected.yml.
set -uo pipefail

out=${1:?usage: capture-nvidia-fixtures.sh OUT_DIR}
mkdir -p "$out"

probe() {  # probe FILE CMD...: the command's stdout into FILE, its exit status into FILE.rc
  local file=$1
  shift
  "$@" >"$out/$file" 2>"$out/$file.stderr"
  echo $? >"$out/$file.rc"
  [ -s "$out/$file.stderr" ] || rm -f "$out/$file.stderr"
}

probe proc-version.txt cat /proc/driver/nvidia/version
probe nvidia-smi.txt nvidia-smi
probe nvidia-smi-q.xml nvidia-smi -q -x
probe query.csv nvidia-smi --query-gpu=name,driver_version,memory.total,pci.device_id --format=csv,noheader
probe nvidia-smi-L.txt nvidia-smi -L
probe proc-modules-nvidia.txt grep -E '^nvidia' /proc/modules
probe uname-r.txt uname -r
probe os-release.txt cat /etc/os-release

{
  echo "captured: $(date -u +%Y-%m-%dT%H:%M:%SZ) by scripts/capture-nvidia-fixtures.sh (read-only probes)"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "gpus: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr -s ' ' | paste -sd';')"
  echo "kernel: $(uname -r)"
  echo "os: $(grep -m1 '^PRETTY_NAME=' /etc/os-release 2>/dev/null | cut -d= -f2-)"
  # The module type: /proc/driver/nvidia/version says "Open Kernel Module" for the open one (modinfo may be absent).
  echo "module: $(grep -o 'Open Kernel Module\|Kernel Module' /proc/driver/nvidia/version 2>/dev/null | head -1)"
} >"$out/source.txt"
cat "$out/source.txt"
