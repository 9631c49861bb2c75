#!/usr/bin/env bash
# `make compose-test`: docker-compose.yml run for real with podman on this host. Builds the images
# (images.sh), writes a containers.conf for this run (CONTAINERS_CONF), starts `podman system service`
# on a socket of the run's own for docker-compose (DOCKER_HOST), brings the topology up while running
# each container's health check (podman runs none by itself without systemd), waits until all nine
# services are healthy, runs checks.sh, then kills the containers and takes everything down with
# `down -v`: containers, networks, volumes, the service and its socket are gone afterwards, on
# failure too.
#
# SECURE=1 (`make compose-test SECURE=1`) runs the secured variant: docker-compose.secure.yml over
# docker-compose.yml, with certificates that `odradek dev certs` writes from inside Odradek's image,
# and the checks over mutual TLS and HTTPS.
#
# Exits 0 with a "skipped" line where podman cannot run containers; COMPOSE_TEST_REQUIRED=1 makes
# that a failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
: "${COMPOSE_PROJECT:=odradekct}"
: "${HEALTHY_TIMEOUT_S:=240}"
export ODRADEK_IMAGE=${ODRADEK_IMAGE:-localhost/odradek} ODRADEK_TAG=${ODRADEK_TAG:-compose-test}
export ZOOKEEPER_IMAGE=${ZOOKEEPER_IMAGE:-localhost/odradek-zookeeper:3.8}
SERVICES=(zookeeper controller-1 controller-2 broker-1 broker-2 broker-3 coordinator-1 coordinator-2 gateway)

started=$SECONDS
step() { printf '== [%3ds] %s\n' $((SECONDS - started)) "$*"; }

skip() {
  if [ "${COMPOSE_TEST_REQUIRED:-0}" = 1 ]; then echo "compose-test: $*" >&2; exit 1; fi
  echo "compose-test skipped: $*"; exit 0
}

run_dir=$(mktemp -d /tmp/odradek-compose-test.XXXXXX)
trap 'rm -rf "$run_dir"' EXIT
export CONTAINERS_CONF=$run_dir/containers.conf
# crun refuses hybrid cgroups and root cannot raise limits in some sandboxes: runc, cgroupfs and
# ulimits within the hard limits
cat >"$CONTAINERS_CONF" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF

command -v podman >/dev/null || { skip "podman is not installed ('apt-get install podman')"; }
command -v docker-compose >/dev/null || { skip "docker-compose is not installed ('apt-get install docker-compose')"; }
command -v debootstrap >/dev/null || { skip "debootstrap is not installed ('apt-get install debootstrap')"; }
[ "$(id -u)" = 0 ] || { skip "needs root (debootstrap and rootful podman)"; }
podman info >/dev/null 2>&1 || { skip "podman cannot run here: $(podman info 2>&1 | tail -1)"; }

step "images"
"$here/images.sh"

socket=$run_dir/podman.sock
export DOCKER_HOST=unix://$socket
compose=(docker-compose --ansi never -p "$COMPOSE_PROJECT" -f "$repo/docker-compose.yml")
if [ "${SECURE:-0}" = 1 ]; then
  export ODRADEK_TLS_DIR=$run_dir/tls
  compose+=(-f "$repo/docker-compose.secure.yml")
  step "certificates: odradek dev certs in $ODRADEK_IMAGE:$ODRADEK_TAG, into $ODRADEK_TLS_DIR"
  mkdir -p "$ODRADEK_TLS_DIR"
  podman run --rm --user 0 --network none --volume "$ODRADEK_TLS_DIR:/out" --entrypoint odradek \
    "$ODRADEK_IMAGE:$ODRADEK_TAG" dev certs --out /out --files-at /etc/odradek/tls 2>&1 | sed 's/^/   /'
  # the image's user reads the keys, which only their owner may read
  chown -R 10001:10001 "$ODRADEK_TLS_DIR"
fi
service_pid= health_pid=

cleanup() {
  status=$?
  set +e
  trap - EXIT INT TERM
  [ -n "$health_pid" ] && kill "$health_pid" 2>/dev/null && wait "$health_pid" 2>/dev/null
  if [ "$status" != 0 ] && [ -S "$socket" ]; then
    echo "-- failed: state and last log lines"
    podman ps -a --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" \
      --format '{{.Names}} {{.Status}}' || true
    for service in "${SERVICES[@]}"; do
      echo "--- $service"; "${compose[@]}" logs --tail=15 "$service" 2>&1 | tail -15 || true
    done
  fi
  if [ -S "$socket" ]; then
    # the checks are over: SIGKILL rather than each broker's controlled shutdown, then remove it all
    step "kill, then down -v"
    down_started=$SECONDS
    "${compose[@]}" kill 2>&1 | sed 's/^/   /' || true
    "${compose[@]}" down -v --remove-orphans 2>&1 | sed 's/^/   /' || true
    step "kill and down -v took $((SECONDS - down_started)) s"
  fi
  podman ps -aq --filter "name=^${COMPOSE_PROJECT}" | xargs -r podman rm -f >/dev/null 2>&1 || true
  podman volume ls -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" | xargs -r podman volume rm -f >/dev/null 2>&1 || true
  podman network ls -q --filter "name=^${COMPOSE_PROJECT}" | xargs -r podman network rm -f >/dev/null 2>&1 || true
  [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null
  left_containers=$(podman ps -aq --filter "name=^${COMPOSE_PROJECT}" | wc -l)
  left_volumes=$(podman volume ls -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" | wc -l)
  left_networks=$(podman network ls -q --filter "name=^${COMPOSE_PROJECT}" | wc -l)
  rm -rf "$run_dir"
  echo "== left behind: $left_containers containers, $left_volumes volumes, $left_networks networks," \
       "service socket $([ -e "$socket" ] && echo present || echo removed)"
  if [ "$status" = 0 ] && [ $((left_containers + left_volumes + left_networks)) != 0 ]; then status=1; fi
  [ "$status" = 0 ] && echo "compose-test passed in $((SECONDS - started)) s" || echo "compose-test FAILED" >&2
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "podman system service on $socket"
podman system service --time=0 "unix://$socket" >"$run_dir/service.log" 2>&1 &
service_pid=$!
deadline=$((SECONDS + 30))
until [ -S "$socket" ] && docker-compose version >/dev/null 2>&1 && \
      curl -sf --unix-socket "$socket" http://d/_ping >/dev/null; do
  [ $SECONDS -lt $deadline ] || { echo "podman system service did not answer" >&2; exit 1; }
  sleep 0.5
done

# The free port the gateway is published on: a fixed one could be a host service's
export ODRADEK_GATEWAY_PORT=${ODRADEK_GATEWAY_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}

# podman runs health checks only through systemd timers: run each container's here, every 2 s until
# it is healthy, then at the compose file's 10 s interval
"$here/healthchecks.sh" "$COMPOSE_PROJECT" &
health_pid=$!

step "up -d (gateway on 127.0.0.1:$ODRADEK_GATEWAY_PORT)"
up_started=$SECONDS
deadline=$((SECONDS + HEALTHY_TIMEOUT_S))
# up -d itself waits for the services others depend on to be healthy
if ! timeout "$HEALTHY_TIMEOUT_S" "${compose[@]}" up -d 2>&1 | sed 's/^/   /'; then
  echo "docker-compose up failed or took over ${HEALTHY_TIMEOUT_S} s" >&2; exit 1
fi
while :; do
  healthy=$(podman ps --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" --filter health=healthy -q | wc -l)
  [ "$healthy" -ge ${#SERVICES[@]} ] && break
  [ $SECONDS -lt $deadline ] || { echo "only $healthy of ${#SERVICES[@]} services healthy after ${HEALTHY_TIMEOUT_S} s" >&2; exit 1; }
  sleep 2
done
step "all ${#SERVICES[@]} services healthy, $((SECONDS - up_started)) s after up"
podman ps --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" --format '   {{.Names}}  {{.Status}}' | sort

step "checks"
COMPOSE_PROJECT=$COMPOSE_PROJECT CHECK_TLS_DIR=${ODRADEK_TLS_DIR:-} "$here/checks.sh"
