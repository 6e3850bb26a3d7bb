#!/usr/bin/env bash
# Prepare ansible-test for a machine that reaches PyPI but not ansible's CI file host:
# put pip wheels and the bootstrap shim where ansible-test looks for them. Idempotent.
#   usage: scripts/ansible-test-offline.sh <python-with-pip>
set -euo pipefail
python=${1:?usage: ansible-test-offline.sh <python>}
here=$(cd "$(dirname "$0")" && pwd)
cache="${HOME}/.ansible/test/cache"
mkdir -p "$cache"
# pip versions ansible-test bootstraps: 24.2 (ansible-core 2.19), 25.2 (2.20, 2.21).
for version in 24.2 25.2; do
  wheel="$cache/pip-${version}-py3-none-any.whl"
  if [ ! -f "$wheel" ]; then
    PIP_CONSTRAINT='' "$python" -m pip download --quiet --no-deps --only-binary=:all: \
      -d "$cache" "pip==${version}"
  fi
  install -m 0644 "$here/get_pip_shim.py" "$cache/get_pip_${version/./_}.py"
done
