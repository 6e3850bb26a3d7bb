#!/usr/bin/env bash
# Build a real Kubernetes v1.20.2 control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler) from Debian bookworm's `kubernetes` source package, with Debian's Go 1.19,
# plus Debian's etcd-server. Nothing is installed system-wide: apt runs on a private sources
# list / lists / cache under the cache dir and every .deb is unpacked with `dpkg -x`.
#
# Output: $K8S_REAL_CACHE/<version>/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,etcd}
# The build is skipped when those binaries are already present.
#
# Environment:
#   K8S_REAL_CACHE       cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/metalplane/k8s-real)
#   K8S_REAL_VERSION     upstream version directory name (default v1.20.2)
#   K8S_REAL_KEEP_WORK   1 = keep the 3 GB work tree (source, Go cache) after a successful build
#   K8S_REAL_NICE        niceness of the build (default 10)
#   K8S_REAL_APT_ETC, K8S_REAL_DEBIAN_MIRROR, K8S_REAL_DEBIAN_SECURITY_MIRROR
#                        where the Debian mirrors come from; see apt-sources.sh next to this script
#
# The Debian mirrors are the ones this machine's apt already uses (apt-sources.sh reads
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list|*.sources); there is no default host.
# See docs/testing/k8s-real.md.
set -euo pipefail

VERSION="${K8S_REAL_VERSION:-v1.20.2}"
CACHE_ROOT="${K8S_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metalplane/k8s-real}"
ROOT="$CACHE_ROOT/$VERSION"
BIN="$ROOT/bin"
W="$ROOT/work"
NICE="${K8S_REAL_NICE:-10}"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler etcd)
# Upstream commit of v1.20.2 (what `git describe` would give in a git checkout).
KUBE_COMMIT=faecb196815e248d3ecfb03c680a4507229c2a56

log() { printf '[k8s-real build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

have_all() {
	local b
	for b in "${BINARIES[@]}"; do
		[[ -x "$BIN/$b" ]] || return 1
	done
}

if have_all; then
	log "binaries present in $BIN, nothing to do"
	exit 0
fi

START=$(date +%s)
mkdir -p "$W"/apt/lists/partial "$W"/apt/cache/archives/partial "$W"/src "$W"/debs "$W"/sysroot "$W"/home "$BIN"

# 1. private apt configuration (the system apt state is never touched), with the Debian mirrors
#    of this machine's own apt sources; apt-sources.sh fails and names the file to fix if none is found
"$(dirname "${BASH_SOURCE[0]}")/apt-sources.sh" bookworm >"$W/apt/sources.list"
log "private sources list: $(grep -v '^#' "$W/apt/sources.list" | cut -d' ' -f2 | sort -u | tr '\n' ' ')"
: >"$W/apt/status"
APT_OPTS=(
	-o "Dir::Etc::SourceList=$W/apt/sources.list"
	-o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$W/apt/lists"
	-o "Dir::State::status=$W/apt/status"
	-o "Dir::Cache=$W/apt/cache"
	-o "APT::Sandbox::User=root"
	-q
)
log "apt-get update (private lists in $W/apt)"
apt-get "${APT_OPTS[@]}" update >"$W/apt-update.log" 2>&1 || {
	cat "$W/apt-update.log" >&2
	exit 1
}

# 2. source package (orig tarball with vendor/)
if ! compgen -G "$W/src/kubernetes_*.orig.tar.*" >/dev/null; then
	log "apt-get source --download-only kubernetes"
	(cd "$W/src" && apt-get "${APT_OPTS[@]}" source --download-only kubernetes)
fi

# 3. toolchain and runtime debs
DEBS=(golang-1.19-go golang-1.19-src etcd-server golang-github-modern-go-reflect2-dev)
if ! command -v rsync >/dev/null; then
	DEBS+=(rsync libpopt0 libxxhash0) # kube's build scripts call rsync
fi
log "apt-get download ${DEBS[*]}"
(cd "$W/debs" && apt-get "${APT_OPTS[@]}" download "${DEBS[@]}")

# 4. unpack without installing
for deb in "$W"/debs/*.deb; do
	dpkg -x "$deb" "$W/sysroot"
done

# 5. unpack the upstream tree (the Debian patch set is not applied)
ORIG=$(compgen -G "$W/src/kubernetes_*.orig.tar.*" | head -n1)
rm -rf "$W/src/kubernetes-1.20.2"
log "unpacking $(basename "$ORIG")"
tar -C "$W/src" -xf "$ORIG"
TREE=$(find "$W/src" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n1)
[[ -d "$TREE/vendor" ]] || {
	log "no vendor/ in $TREE"
	exit 1
}

# 6. swap the vendored modern-go/reflect2 1.0.1 (crashes under Go >= 1.18 with
#    "fatal error: fault" on the first custom-resource request) for Debian's 1.0.2
R2_SRC="$W/sysroot/usr/share/gocode/src/github.com/modern-go/reflect2"
R2_DST="$TREE/vendor/github.com/modern-go/reflect2"
[[ -d "$R2_SRC" ]] || {
	log "missing $R2_SRC"
	exit 1
}
rm -rf "$R2_DST"
mkdir -p "$R2_DST"
cp "$R2_SRC"/*.go "$R2_DST"/
cp "$R2_SRC"/*.s "$R2_DST"/ 2>/dev/null || true
rm -f "$R2_DST"/*_test.go
log "reflect2 replaced with Debian's copy ($(find "$R2_DST" -mindepth 1 -maxdepth 1 | wc -l) files)"

# 7. environment
GOROOT="$W/sysroot/usr/lib/go-1.19"
[[ -x "$GOROOT/bin/go" ]] || {
	log "no go in $GOROOT"
	exit 1
}
export GOROOT
export PATH="$GOROOT/bin:$PATH:$W/sysroot/usr/bin"
export LD_LIBRARY_PATH="$W/sysroot/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOCACHE="$W/gocache" GOPROXY=off CGO_ENABLED=0 GOFLAGS='' GO111MODULE=''
export KUBE_GIT_VERSION="$VERSION" KUBE_GIT_TREE_STATE=clean KUBE_GIT_COMMIT="$KUBE_COMMIT"
export HOME="$W/home"
unset GOPATH
log "go: $(go version)"

# 8. build
log "make WHAT=cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler (nice $NICE)"
MAKE_START=$(date +%s)
(cd "$TREE" && nice -n "$NICE" make WHAT="cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler")
MAKE_END=$(date +%s)

for b in kube-apiserver kube-controller-manager kube-scheduler; do
	install -m 0755 "$TREE/_output/bin/$b" "$BIN/$b.tmp"
	mv "$BIN/$b.tmp" "$BIN/$b"
done
install -m 0755 "$W/sysroot/usr/bin/etcd" "$BIN/etcd.tmp"
mv "$BIN/etcd.tmp" "$BIN/etcd"

# 9. check
"$BIN/kube-apiserver" --version
"$BIN/etcd" --version | sed -n 1p # not head: SIGPIPE would fail under pipefail
END=$(date +%s)
DISK=$(du -sh "$ROOT" | cut -f1)
log "done: total $((END - START)) s (make $((MAKE_END - MAKE_START)) s), disk used under $ROOT: $DISK"
{
	echo "version=$VERSION"
	echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "total_seconds=$((END - START))"
	echo "make_seconds=$((MAKE_END - MAKE_START))"
	echo "disk_with_work=$DISK"
} >"$BIN/BUILD-INFO"

if [[ "${K8S_REAL_KEEP_WORK:-0}" != 1 ]]; then
	log "removing work tree $W (set K8S_REAL_KEEP_WORK=1 to keep it)"
	rm -rf "$W"
	log "disk kept: $(du -sh "$ROOT" | cut -f1)"
fi
