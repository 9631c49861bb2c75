#!/usr/bin/env bash
# Runs `podman healthcheck run` for every container of compose project $1 that has a health check,
# every 2 s until it is healthy and every 10 s after, until killed: podman leaves health checks to
# systemd timers, which a host without systemd lacks.
set -uo pipefail
project=$1
declare -A next_check
while :; do
  now=$SECONDS
  while read -r id health; do
    [ -n "$id" ] && [ "$health" != "" ] || continue
    [ "${next_check[$id]:-0}" -le "$now" ] || continue
    if podman healthcheck run "$id" </dev/null >/dev/null 2>&1 && [ "$health" = healthy ]; then
      next_check[$id]=$((now + 10))
    else
      next_check[$id]=$((now + 2))
    fi
  done < <(podman ps --filter "label=com.docker.compose.project=$project" \
             --format '{{.ID}} {{.Status}}' 2>/dev/null \
           | sed -n 's/^\([0-9a-f]*\) .*(\(healthy\|unhealthy\|starting\)).*/\1 \2/p')
  sleep 1
done
