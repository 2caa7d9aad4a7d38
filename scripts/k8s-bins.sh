#!/usr/bin/env bash
# Builds the Kubernetes components the test cluster runs (internal/testkit/k8stest):
# kube-apiserver, kube-controller-manager, kube-scheduler and kubelet, from
# the Go module proxy (there is no other registry here), into
#   /var/cache/paddock/k8s/<version>/bin
# in a module directory of its own beside it (…/src, outside the clone, so
# paddock's go.mod never sees Kubernetes'). Skipped when the four binaries
# are there and report the version: warm cost 0. Cold: 10-14 minutes and
# about 4 GB of Go caches (see docs/BACKENDS.md).
# Usage: scripts/k8s-bins.sh   (the directory is internal/testkit/k8stest's BinDir)
set -euo pipefail

# The version is internal/testkit/k8stest's Version, which the tests run.
K8S_VERSION=$(sed -n 's/^const Version = "\(v[0-9.]*\)"$/\1/p' "$(dirname "$0")/../internal/testkit/k8stest/k8stest.go")
[ -n "$K8S_VERSION" ] || { echo "k8s-bins: no Version in internal/testkit/k8stest/k8stest.go" >&2; exit 1; }
# The staging modules (k8s.io/api, client-go, …) are versioned v0.<minor>.<patch>.
STAGING_VERSION=v0.${K8S_VERSION#v1.}
DIR=/var/cache/paddock/k8s/$K8S_VERSION
CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
export PATH="/usr/local/go/bin:$PATH"

say() { printf '\033[1mk8s-bins:\033[0m %s\n' "$*"; }

built() {
  local c
  for c in "${CMDS[@]}"; do
    "$DIR/bin/$c" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION" || return 1
  done
}
if built; then
  say "Kubernetes $K8S_VERSION cached in $DIR/bin"
  exit 0
fi

say "building ${CMDS[*]} $K8S_VERSION into $DIR/bin (cold: 10-14 minutes)"
mkdir -p "$DIR/src"
cd "$DIR/src"
# k8s.io/kubernetes' own go.mod replaces its staging modules with relative
# paths (./staging/src/…), which only work inside its tree; here each is
# replaced with the module proxy's release of the same version. The two
# sample modules (sample-cli-plugin, sample-controller) are not served by
# the proxy and not needed.
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go
  cloud-provider cluster-bootstrap code-generator component-base component-helpers
  controller-manager cri-api cri-client csi-translation-lib dynamic-resource-allocation
  endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
  kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver)
{
  printf 'module paddock.local/k8s-bins\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
  for m in "${staging[@]}"; do printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$STAGING_VERSION"; done
  printf ')\n'
} > go.mod
{
  printf '//go:build tools\n\n// Package tools pins the commands this module builds.\npackage tools\n\nimport (\n'
  for c in "${CMDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  printf ')\n'
} > tools.go
# (GOFLAGS cleared: a -mod=vendor or similar from the caller does not apply here.)
export GOFLAGS= CGO_ENABLED=0
go mod tidy
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
LDF="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
LDF="$LDF -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
# Built into a fresh directory and moved in whole, so a killed build never
# leaves a half set that looks cached.
rm -rf "$DIR/bin.new" && mkdir -p "$DIR/bin.new"
pkgs=()
for c in "${CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
start=$SECONDS
go build -trimpath -ldflags "$LDF" -o "$DIR/bin.new/" "${pkgs[@]}"
rm -rf "$DIR/bin" && mv "$DIR/bin.new" "$DIR/bin"
built || { say "the built binaries do not report $K8S_VERSION"; exit 1; }
say "built in $((SECONDS - start)) s"
