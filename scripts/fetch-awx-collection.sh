#!/usr/bin/env bash
# Fetch the awx.awx collection (23.9.0) into .build/awx-collections, for playbooks/awx/configure.yml's offline checks
# (awx.awx's own argument validation, ansible-lint) in `make test`.
#
# Why this way: Galaxy is out of reach here (only package registries are), and awx.awx is not a PyPI package of its
# own; the `ansible` 9.13.0 wheel on PyPI ships awx.awx 23.9.0 (later `ansible` releases no longer include it). The
# wheel is checked against a pinned SHA-256 and only ansible_collections/awx/awx is kept. Users of configure.yml
# install awx.awx from Galaxy or Automation Hub as usual (docs/awx.md). Idempotent.
#
#   scripts/fetch-awx-collection.sh [PYTHON] [DEST]   (defaults: python3, <repo>/.build/awx-collections)
set -euo pipefail

WHEEL="ansible==9.13.0"
WHEEL_FILE="ansible-9.13.0-py3-none-any.whl"
WHEEL_SHA256="b64c6e8cad0171576e0ed4b1fd48a5dc551128580dbb979d0e8b4cd85b969074"
AWX_VERSION="23.9.0"

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${1:-python3}
dest=${2:-"$repo_root/.build/awx-collections"}
manifest="$dest/ansible_collections/awx/awx/MANIFEST.json"

if [ -f "$manifest" ] && grep -q "\"version\": \"$AWX_VERSION\"" "$manifest"; then
  echo "awx.awx $AWX_VERSION already at $dest"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --dest "$work" "$WHEEL"
echo "$WHEEL_SHA256  $work/$WHEEL_FILE" | sha256sum --check --quiet
rm -rf "$dest/ansible_collections/awx"
"$python" - "$work/$WHEEL_FILE" "$dest" <<'PY'
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    members = [name for name in archive.namelist() if name.startswith("ansible_collections/awx/awx/")]
    archive.extractall(dest, members)
print(f"fetched awx.awx ({len(members)} files) into {dest}")
PY
grep -q "\"version\": \"$AWX_VERSION\"" "$manifest"
