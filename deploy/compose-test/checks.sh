#!/usr/bin/env bash
# The checks compose-test.sh runs against its running project (COMPOSE_PROJECT, ODRADEK_IMAGE,
# ODRADEK_TAG, ODRADEK_GATEWAY_PORT): a topic with replication factor 3; produce and consume with
# Odradek's CLI inside the brokers' containers; produce and consume through the gateway from the host;
# one consumer group across two client containers; a broker's container killed, produce on, the
# container started again and the broker back in every partition's ISR. With CHECK_TLS_DIR (the
# host's copy of the certificates docker-compose.secure.yml mounts at /etc/odradek/tls) it checks the
# secured variant: every tool over mutual TLS as CN=admin, the gateway over HTTPS, and a client
# without TLS refused.
set -euo pipefail

project=$COMPOSE_PROJECT
image=$ODRADEK_IMAGE:$ODRADEK_TAG
network=${project}_default
gateway=http://127.0.0.1:$ODRADEK_GATEWAY_PORT
# the client settings of each tool and the client containers' mounts: none, or TLS as CN=admin
admin_config=() producer_config=() consumer_config=() curl_tls=() client_mounts=()
if [ -n "${CHECK_TLS_DIR:-}" ]; then
  admin_config=(--command-config /etc/odradek/tls/odradek-client.properties)
  producer_config=(--producer.config /etc/odradek/tls/odradek-client.properties)
  consumer_config=(--consumer.config /etc/odradek/tls/odradek-client.properties)
  gateway=https://127.0.0.1:$ODRADEK_GATEWAY_PORT
  curl_tls=(--cacert "$CHECK_TLS_DIR/ca.pem")
  client_mounts=(--volume "$CHECK_TLS_DIR:/etc/odradek/tls:ro")
fi
bootstrap=broker-1:9092,broker-2:9092,broker-3:9092
topic=compose-check${CHECK_SUFFIX:-}
group_topic=compose-group${CHECK_SUFFIX:-}
group=compose-group${CHECK_SUFFIX:-}
gateway_group=compose-gateway${CHECK_SUFFIX:-}
started=$SECONDS

trap 'printf "   FAILED at checks.sh line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR
ok() { printf '   ok [%3ds] %s\n' $((SECONDS - started)) "$*"; }
fail() { printf '   FAILED %s\n' "$*" >&2; exit 1; }
container() {
  podman ps -aq --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$1"
}
# odradek ARGS... inside service $1's running container
odradek_in() { local service=$1; shift; podman exec -i "$(container "$service")" odradek "$@"; }
# odradek ARGS... in a client container $1 of its own on the compose network
odradek_client() {
  local name=$1; shift
  podman run --rm -i --network "$network" "${client_mounts[@]}" --name "${project}-client-$name" \
    --entrypoint odradek "$image" "$@"
}
# wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds
wait_for() {
  local deadline=$((SECONDS + $1)) description=$2; shift 2
  until "$@"; do [ $SECONDS -lt $deadline ] || fail "$description: not within the deadline"; sleep 2; done
}
lines() { seq "$2" "$3" | sed "s/^/$1/"; }
broker_3_out_of_isr() {  # topic: no partition's ISR names broker 3
  odradek_in broker-1 topics --bootstrap-server "$bootstrap" "${admin_config[@]}" --describe --topic "$1" 2>/dev/null \
    | awk -F'\t' '/Partition:/ { n++; if ($6 ~ /[ ,]3(,|$)/) inside++ } END { exit !(n > 0 && inside == 0) }'
}
partitions_in_full_isr() {  # topic: every partition's ISR has its three replicas
  odradek_in broker-1 topics --bootstrap-server "$bootstrap" "${admin_config[@]}" --describe --topic "$1" 2>/dev/null \
    | awk -F'\t' '/Partition:/ { n++; split($6, isr, ","); if (length(isr) == 3) full++ } END { exit !(n > 0 && n == full) }'
}

# --- secured: a client without TLS gets nothing
if [ -n "${CHECK_TLS_DIR:-}" ]; then
  if timeout 30 podman exec -i "$(container broker-1)" odradek topics --bootstrap-server "$bootstrap" --list \
      >/dev/null 2>&1; then
    fail "a plaintext client listed the topics of the secured cluster"
  fi
  curl -sf "http://127.0.0.1:$ODRADEK_GATEWAY_PORT/brokers" >/dev/null 2>&1 && fail "the gateway answered plain HTTP"
  ok "secured: a plaintext gRPC client and plain HTTP to the gateway are refused; the checks below run as CN=admin over mutual TLS"
fi

# --- a topic with replication factor 3, from a broker's container
odradek_in broker-1 topics --bootstrap-server "$bootstrap" "${admin_config[@]}" --create --topic "$topic" --partitions 6 \
  --replication-factor 3 >/dev/null
wait_for 60 "$topic in full ISR" partitions_in_full_isr "$topic"
odradek_in broker-1 topics --bootstrap-server "$bootstrap" "${admin_config[@]}" --describe --topic "$topic" | sed 's/^/      /'
ok "topic $topic: 6 partitions, replication factor 3, every ISR full (odradek topics in broker-1)"

# --- produce in broker-2's container, consume in broker-3's
lines broker- 1 100 | odradek_in broker-2 console-producer --bootstrap-server "$bootstrap" "${producer_config[@]}" --topic "$topic"
consumed=$(odradek_in broker-3 console-consumer --bootstrap-server "$bootstrap" "${consumer_config[@]}" --topic "$topic" \
  --from-beginning --max-messages 100 --timeout-ms 30000 2>/dev/null | sort)
[ "$consumed" = "$(lines broker- 1 100 | sort)" ] || fail "broker-3 read $(wc -l <<<"$consumed") records, not the 100 produced"
ok "100 records produced in broker-2's container (console-producer), all read back in broker-3's (console-consumer)"

# --- through the gateway, from the host
[ "$(curl -sf "${curl_tls[@]}" "$gateway/brokers" | jq -c '.brokers | sort')" = "[1,2,3]" ] || fail "gateway /brokers"
# binary (base64) values: the records produced above are plain text, not JSON
body=$(lines gateway- 1 20 | jq -R '{value: @base64}' | jq -s '{records: .}')
offsets=$(curl -sf "${curl_tls[@]}" -X POST "$gateway/topics/$topic" -H 'Content-Type: application/vnd.kafka.binary.v2+json' \
  -d "$body" | jq '[.offsets[] | select(.error_code == null)] | length')
[ "$offsets" = 20 ] || fail "gateway produce acknowledged $offsets of 20 records"
v2=application/vnd.kafka.v2+json
instance=$(curl -sf "${curl_tls[@]}" -X POST "$gateway/consumers/$gateway_group" -H "Content-Type: $v2" \
  -d '{"name": "host", "format": "binary", "auto.offset.reset": "earliest"}' | jq -r .instance_id)
consumer=$gateway/consumers/$gateway_group/instances/$instance
curl -sf "${curl_tls[@]}" -X POST "$consumer/subscription" -H "Content-Type: $v2" -d "{\"topics\": [\"$topic\"]}"
seen=$(mktemp)
trap 'rm -f "$seen"' EXIT
deadline=$((SECONDS + 60))
while [ "$(sort -u "$seen" | wc -l)" -lt 120 ]; do
  [ $SECONDS -lt $deadline ] || fail "the gateway's consumer read $(sort -u "$seen" | wc -l) of 120 records"
  curl -sf "${curl_tls[@]}" "$consumer/records?timeout=2000" -H 'Accept: application/vnd.kafka.binary.v2+json' \
    | jq -r '.[].value | @base64d' >>"$seen"
done
curl -sf "${curl_tls[@]}" -X DELETE "$consumer" -H "Content-Type: $v2"
[ "$(sort -u "$seen")" = "$( (lines broker- 1 100; lines gateway- 1 20) | sort)" ] \
  || fail "the gateway's consumer read other records than the 120 produced"
ok "20 records produced through the gateway from the host ($gateway), and a v2 consumer read all 120"

# --- one consumer group across two client containers
odradek_in broker-1 topics --bootstrap-server "$bootstrap" "${admin_config[@]}" --create --topic "$group_topic" --partitions 4 \
  --replication-factor 3 >/dev/null
wait_for 60 "$group_topic in full ISR" partitions_in_full_isr "$group_topic"
out_a=$(mktemp) out_b=$(mktemp)
members_errors() { for out in "$out_a" "$out_b"; do sed 's/^/      member: /' "$out.err" 2>/dev/null | tail -5 >&2; done; }
trap 'status=$?; [ $status = 0 ] || members_errors
      rm -f "$seen" "$out_a" "$out_b" "$out_a.err" "$out_b.err"
      podman rm -f "${project}-client-a" "${project}-client-b" >/dev/null 2>&1 || true' EXIT
# the members run until stopped below, once they have read everything (--timeout-ms only bounds a
# member left idle): an idle timeout as the end would let a member that joined early leave before
# the other has joined, on a loaded machine
for member in a b; do
  out=$out_a; [ $member = b ] && out=$out_b
  odradek_client "$member" console-consumer --bootstrap-server "$bootstrap" "${consumer_config[@]}" --topic "$group_topic" \
    --group "$group" --from-beginning --timeout-ms 300000 --property print.key=true \
    </dev/null >"$out" 2>"$out.err" &
done
two_members() {
  [ "$(odradek_in broker-1 consumer-groups --bootstrap-server "$bootstrap" "${admin_config[@]}" --describe --group "$group" \
        --members 2>/dev/null | awk -v group="$group" '$1 == group' | wc -l)" = 2 ]
}
wait_for 180 "two members in $group" two_members
lines "" 1 200 | awk '{ print "key-" $1 "\tgroup-" $1 }' \
  | odradek_in broker-1 console-producer --bootstrap-server "$bootstrap" "${producer_config[@]}" --topic "$group_topic" --property parse.key=true
all_read() { [ "$(cat "$out_a" "$out_b" | wc -l)" -ge 200 ]; }
wait_for 120 "the two members to read the 200 records" all_read
podman stop --time 20 "${project}-client-a" "${project}-client-b" >/dev/null 2>&1 || true
wait
count_a=$(wc -l <"$out_a") count_b=$(wc -l <"$out_b")
[ "$count_a" -gt 0 ] && [ "$count_b" -gt 0 ] || fail "a member read nothing ($count_a and $count_b records)"
[ "$(cut -f2 "$out_a" "$out_b" | sort)" = "$(lines group- 1 200 | sort)" ] \
  || fail "the two members read $((count_a + count_b)) records, not the 200 produced once each"
ok "group $group: two client containers shared 4 partitions, read $count_a + $count_b = 200 records, none twice"

# --- a broker's container killed, produce on, started again, back in the ISR
podman kill --signal KILL "$(container broker-3)" >/dev/null
wait_for 30 "broker-3's container stopped" \
  bash -c "[ \"\$(podman inspect --format '{{.State.Running}}' $(container broker-3))\" = false ]"
ok "broker-3's container killed (SIGKILL)"
lines after-kill- 1 50 | odradek_in broker-1 console-producer --bootstrap-server "$bootstrap" "${producer_config[@]}" --topic "$topic" \
  --request-required-acks all
consumed=$(odradek_in broker-2 console-consumer --bootstrap-server "$bootstrap" "${consumer_config[@]}" --topic "$topic" \
  --from-beginning --max-messages 170 --timeout-ms 30000 2>/dev/null | grep -c '^after-kill-' || true)
[ "$consumed" = 50 ] || fail "$consumed of the 50 records produced with broker-3 down were read back"
ok "50 records produced with acks=all while broker-3 was down, all read back"
wait_for 90 "broker 3 out of every ISR of $topic" broker_3_out_of_isr "$topic"
ok "broker 3 dropped from the ISR of every partition"
podman start "$(container broker-3)" >/dev/null 2>&1 || fail "podman start broker-3"
wait_for 180 "broker-3 back in every ISR of $topic" partitions_in_full_isr "$topic"
odradek_in broker-1 topics --bootstrap-server "$bootstrap" "${admin_config[@]}" --describe --topic "$topic" | sed 's/^/      /'
ok "broker-3's container started again; broker 3 is back in the ISR of all 6 partitions"
