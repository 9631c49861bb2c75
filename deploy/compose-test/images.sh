#!/usr/bin/env bash
# Builds the images `compose-test.sh` runs, with podman and no registry: a Debian bookworm image from
# `debootstrap --variant=minbase` (made once, kept while it exists); on it, two chains built at once:
# the ZooKeeper image (Debian's zookeeper package), and the Python images (Debian's python3) followed
# by Odradek's image from the repository's Dockerfile with those Python images as its base-image
# build arguments. pip inside the build reaches PyPI through the host's CA bundle and uses the host's
# pip cache, both mounted for the build only (never in an image). compose-test.sh runs it with its
# containers.conf (CONTAINERS_CONF).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${DEBIAN_IMAGE:=localhost/odradek-debian:bookworm}"
: "${PYTHON_IMAGE:=localhost/odradek-python:3.11}"
: "${PYTHON_SLIM_IMAGE:=localhost/odradek-python:3.11-slim}"
: "${ZOOKEEPER_IMAGE:=localhost/odradek-zookeeper:3.8}"
: "${ODRADEK_IMAGE:=localhost/odradek}"
: "${ODRADEK_TAG:=compose-test}"
: "${DEBIAN_MIRROR:=http://deb.debian.org/debian}"

work=$(mktemp -d /tmp/odradek-images.XXXXXX)
trap 'rm -rf "$work"' EXIT

# the host's CA bundle, a pip.conf naming it, and the host's pip cache, mounted for the build's RUN
# steps only: beside the image's own /etc/ssl/certs, which its ca-certificates package writes
build_volumes=()
host_ca=${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$host_ca" ]; then
  printf '[global]\ncert = /run/odradek-build/ca-certificates.crt\n' >"$work/pip.conf"
  build_volumes+=(--volume "$host_ca:/run/odradek-build/ca-certificates.crt:ro"
                  --volume "$work/pip.conf:/etc/pip.conf:ro")
fi
pip_cache=${PIP_CACHE_DIR:-$HOME/.cache/pip}
mkdir -p "$pip_cache" && build_volumes+=(--volume "$pip_cache:/root/.cache/pip")

step() { printf '== %s\n' "$*"; }
size() { podman image inspect --format '{{.Size}}' "$1" | numfmt --to=si; }

# build TAG ARGS...: podman build; its output is printed only when it fails
build() {
  local tag=$1 started=$SECONDS log; shift
  log=$(mktemp "$work/build.XXXXXX.log")
  if ! podman build --network host --layers "${build_volumes[@]}" -t "$tag" "$@" >"$log" 2>&1; then
    tail -40 "$log" >&2; echo "building $tag failed" >&2; return 1
  fi
  printf '   %s built in %d s (%sB)\n' "$tag" $((SECONDS - started)) "$(size "$tag")"
}

if podman image exists "$DEBIAN_IMAGE"; then
  step "Debian image $DEBIAN_IMAGE: present, kept"
else
  step "Debian image $DEBIAN_IMAGE: debootstrap --variant=minbase bookworm"
  base_started=$SECONDS
  rootfs=$work/rootfs
  mkdir "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  debootstrapped=$SECONDS
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$DEBIAN_IMAGE" >"$work/import.log" 2>&1 \
    || { cat "$work/import.log" >&2; exit 1; }
  printf '   %s: debootstrap %d s, import %d s (%sB)\n' "$DEBIAN_IMAGE" $((debootstrapped - base_started)) \
    $((SECONDS - debootstrapped)) "$(size "$DEBIAN_IMAGE")"
  rm -rf "$rootfs"
fi

step "ZooKeeper image $ZOOKEEPER_IMAGE, beside the Python images and then Odradek's image $ODRADEK_IMAGE:$ODRADEK_TAG"
build "$ZOOKEEPER_IMAGE" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" -f "$here/zookeeper.Containerfile" "$here" \
  >"$work/zookeeper.out" 2>&1 &
zookeeper_pid=$!
odradek_status=0
{
  build "$PYTHON_SLIM_IMAGE" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" --target slim -f "$here/python.Containerfile" "$here" &&
  build "$PYTHON_IMAGE" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" --target full -f "$here/python.Containerfile" "$here" &&
  build "$ODRADEK_IMAGE:$ODRADEK_TAG" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" \
    --build-arg "PYTHON_SLIM_IMAGE=$PYTHON_SLIM_IMAGE" --target runtime -f "$repo/Dockerfile" "$repo"
} || odradek_status=$?
zookeeper_status=0
wait "$zookeeper_pid" || zookeeper_status=$?
cat "$work/zookeeper.out"
[ "$odradek_status" = 0 ] && [ "$zookeeper_status" = 0 ]
