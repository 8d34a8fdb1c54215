#!/usr/bin/env bash
# Builds the image gpustack/gpustack-operator:<version> (the crate version) with the Docker
# engine, from local files only (FROM scratch):
#
#   deploy/image/build.sh                     # cargo build --profile dist, then the image
#   deploy/image/build.sh --binary PATH       # an already built binary (the tests pass theirs)
#   deploy/image/build.sh --tag NAME:TAG      # another name
#
# The shared libraries copied in are the ones the binary links, as ldd resolves them here.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

usage() { echo "usage: $0 [--binary PATH] [--tag NAME:TAG]" >&2; exit 2; }
binary="" tag=""
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) [ $# -ge 2 ] || usage; binary=$2; shift 2 ;;
        --binary=*) binary=${1#*=}; shift ;;
        --tag) [ $# -ge 2 ] || usage; tag=$2; shift 2 ;;
        --tag=*) tag=${1#*=}; shift ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done

# The version: [workspace.package] of the root Cargo.toml.
version=$(awk '/^\[workspace.package\]/{p=1; next} /^\[/{p=0} p && /^version *=/{gsub(/[" ]/, "", $0); sub(/^version=/, "", $0); print; exit}' "$root/Cargo.toml")
[ -n "$version" ] || { echo "error: no version in [workspace.package] of $root/Cargo.toml" >&2; exit 1; }
tag=${tag:-gpustack/gpustack-operator:$version}

if [ -z "$binary" ]; then
    (cd "$root" && cargo build --locked --profile dist)
    binary=$root/target/dist/gpustack-operator
fi
[ -x "$binary" ] || { echo "error: --binary '$binary' is not an executable file" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
rootfs=$ctx/rootfs
mkdir -p "$rootfs/usr/bin" "$rootfs/etc/ssl/certs" "$rootfs/etc/gpustack/crds" \
    "$rootfs/etc/gpustack/charts" "$rootfs/tmp" "$ctx/data"
chmod 1777 "$rootfs/tmp"

cp "$binary" "$rootfs/usr/bin/gpustack-operator"
# A debug build carries its symbols; the image needs none.
if command -v strip >/dev/null 2>&1; then strip --strip-debug "$rootfs/usr/bin/gpustack-operator"; fi
chmod 0755 "$rootfs/usr/bin/gpustack-operator"
for cmd in worker worker-gateway device-manager model-manager; do
    ln -s gpustack-operator "$rootfs/usr/bin/$cmd"
done

# Exactly the libraries the binary links, and the loader, at the paths ldd resolved.
ldd "$binary" | awk '/=>/ {print $3; next} $1 ~ /^\// {print $1}' | while read -r lib; do
    [ -n "$lib" ] && [ -e "$lib" ] || continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done

cp -L /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/var/lib/gpustack:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"

cp "$root"/deploy/crds/*.yaml "$rootfs/etc/gpustack/crds/"
tar -C "$root/deploy/chart" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -czf "$rootfs/etc/gpustack/charts/gpustack-operator-$version.tgz" gpustack-operator

cp "$root/deploy/image/Dockerfile" "$ctx/Dockerfile"
docker build --quiet --build-arg "VERSION=$version" -t "$tag" "$ctx" >/dev/null
echo "$tag"
