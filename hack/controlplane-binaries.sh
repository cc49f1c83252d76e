#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, etcd and kubectl from their
# Go modules into a versioned cache folder outside the repository, once per
# machine, and prints that folder.
#
# Nothing is downloaded but Go modules: the versions are pinned by
# hack/tools/go.mod. A fresh clone on the same machine reuses the folder; each
# binary that is missing from it is built (all four: about ten minutes on two
# cores), the others are kept.
#
#   hack/controlplane-binaries.sh          # build if missing, print the folder
#   KUBEBUILDER_ASSETS=$(hack/controlplane-binaries.sh) go test ./...
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/hack/tools"

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$tools/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$tools/go.mod")
cache="${ONCE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/once}"
dir="$cache/controlplane/kube-${k8s_version}-etcd-${etcd_version}"

# Binary name and Go package; each is built from the module hack/tools/go.mod
# pins, kube-apiserver, kube-controller-manager and kubectl from the same
# k8s.io/kubernetes version.
binaries=(
  "etcd go.etcd.io/etcd/server/v3"
  "kubectl k8s.io/kubernetes/cmd/kubectl"
  "kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager"
)

complete() {
  local b
  for b in "${binaries[@]}"; do
    [[ -x "$dir/${b%% *}" ]] || return 1
  done
}

if complete; then
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
# One builder at a time: a second caller waits for the first, then finds the
# binaries in place.
exec 9>"$cache/controlplane.lock"
flock 9
if complete; then
  echo "$dir"
  exit 0
fi

major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w \
  -X $pkg.gitVersion=$k8s_version \
  -X $pkg.gitMajor=$major \
  -X $pkg.gitMinor=$minor \
  -X $pkg.gitTreeState=clean \
  -X $pkg.buildDate=1970-01-01T00:00:00Z"

mkdir -p "$dir"
tmp=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "Building the control plane (kube-apiserver and kube-controller-manager $k8s_version, etcd $etcd_version, kubectl) into $dir; this takes a few minutes once per machine" >&2
cd "$tools"
# Only what is missing: a folder of an earlier layout keeps its binaries and
# gains the new ones. Each lands by rename, so a binary in the folder is whole.
for b in "${binaries[@]}"; do
  name=${b%% *}
  [[ -x "$dir/$name" ]] && continue
  echo "Building $name" >&2
  go build -trimpath -ldflags "$ldflags" -o "$tmp/$name" "${b#* }" >&2
  mv -f "$tmp/$name" "$dir/$name"
done
echo "$dir"
