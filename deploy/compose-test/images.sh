#!/usr/bin/env bash
# Builds the images `compose-test.sh` runs, with podman and no registry: a Debian bookworm base from
# debootstrap (built once, kept while it exists), Python images on it, ZooKeeper from Debian's
# packages, and Odradek's image from the repository's Dockerfile with those Python images as its
# base-image build arguments. pip inside the build reaches PyPI through the host's CA bundle and
# pip.conf, mounted for the build only (never in an image). compose-test.sh runs it with its
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

# the host's CA bundle, and a pip.conf naming it, mounted for the build's RUN steps only: beside the
# image's own /etc/ssl/certs, which its ca-certificates package writes
build_volumes=()
host_ca=${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$host_ca" ]; then
  pip_conf=$(mktemp /tmp/odradek-build-pip.XXXXXX.conf)
  printf '[global]\ncert = /run/odradek-build/ca-certificates.crt\n' >"$pip_conf"
  build_volumes=(--volume "$host_ca:/run/odradek-build/ca-certificates.crt:ro"
                 --volume "$pip_conf:/etc/pip.conf:ro")
fi
build_log=$(mktemp /tmp/odradek-build.XXXXXX.log)
trap 'rm -f "${pip_conf:-}" "$build_log"' EXIT

step() { printf '== %s\n' "$*"; }

# build TAG ARGS...: podman build, its output kept for a failure
build() {
  local tag=$1 started=$SECONDS; shift
  if ! podman build --network host --layers "${build_volumes[@]}" -t "$tag" "$@" >"$build_log" 2>&1; then
    tail -40 "$build_log" >&2; echo "building $tag failed" >&2; return 1
  fi
  printf '   %s built in %d s (%s)\n' "$tag" $((SECONDS - started)) \
    "$(podman image inspect --format '{{.Size}}' "$tag" | numfmt --to=si)B"
}

if podman image exists "$DEBIAN_IMAGE"; then
  step "base image $DEBIAN_IMAGE: present, kept"
else
  step "base image $DEBIAN_IMAGE: debootstrap --variant=minbase bookworm"
  base_started=$SECONDS
  rootfs=$(mktemp -d /var/tmp/odradek-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs" "${pip_conf:-}" "$build_log"' EXIT
  debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" >"$rootfs.log" 2>&1 \
    || { tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
  rm -f "$rootfs.log"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$DEBIAN_IMAGE" >"$build_log" 2>&1 \
    || { cat "$build_log" >&2; exit 1; }
  printf '   %s made and imported in %d s (%s)\n' "$DEBIAN_IMAGE" $((SECONDS - base_started)) "$(podman image inspect --format '{{.Size}}' "$DEBIAN_IMAGE" | numfmt --to=si)B"
  rm -rf "$rootfs"
fi

step "Python images $PYTHON_SLIM_IMAGE and $PYTHON_IMAGE (Debian's python3 in a venv on PATH)"
build "$PYTHON_SLIM_IMAGE" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" --target slim -f "$here/python.Containerfile" "$here"
build "$PYTHON_IMAGE" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" --target full -f "$here/python.Containerfile" "$here"

step "ZooKeeper image $ZOOKEEPER_IMAGE (Debian's zookeeper package)"
build "$ZOOKEEPER_IMAGE" --build-arg "BASE_IMAGE=$DEBIAN_IMAGE" -f "$here/zookeeper.Containerfile" "$here"

step "Odradek's image $ODRADEK_IMAGE:$ODRADEK_TAG (Dockerfile, target runtime)"
build "$ODRADEK_IMAGE:$ODRADEK_TAG" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" \
  --build-arg "PYTHON_SLIM_IMAGE=$PYTHON_SLIM_IMAGE" --target runtime -f "$repo/Dockerfile" "$repo"
