"""Replication under faults, with real broker processes: leaders killed with SIGKILL under a steady
acks=all load, followers paused (SIGSTOP) past `replica.lag.time.max.ms`, and a leader cut off with
a tail no follower has, which it must truncate when it comes back as a follower.

What must hold: every acknowledged acks=all record survives, once and in order, at the offset it
was acknowledged at; a consumer never sees a record that later vanishes or changes; the ISR shrinks
and grows as followers stall and catch up; acks=all is refused with NOT_ENOUGH_REPLICAS below
`min.insync.replicas`; after a leader change every replica holds the same batches.

The producer is idempotent when the brokers hand out producer ids (InitProducerId): a retried batch
keeps its producer id, epoch and sequence, so retries cannot duplicate. Without producer ids a
retried batch may land twice; the chaos test then allows duplicates of retried values only.
"""

from __future__ import annotations

import collections
import signal
import threading
import urllib.request
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from services.clients.admin import Admin
from services.clients.cluster import Cluster, PartitionInfo
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.records import build_batch, iter_batch_positions, iter_records, parse_header
from services.common.service import node_channel
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import free_port, log_tail, pid_alive, wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_S, create_topic

LAG_TIME_MAX_MS = 3000
MIN_ISR_CONFIG = {"min.insync.replicas": "2"}
# Clients give up on a node after 3 s, so a paused broker only delays them a little.
PAUSED_BROKER_CLIENT_CONFIG = {**CLIENT_CONFIG, "request_timeout_ms": 3000}


# --------------------------------------------------------------------------------------------- helpers

@dataclass(frozen=True)
class ProducerIdentity:
    producer_id: int = -1
    producer_epoch: int = -1

    @property
    def idempotent(self) -> bool:
        return self.producer_id >= 0

    def batch(self, values: list[bytes], base_sequence: int) -> bytes:
        if not self.idempotent:
            return build_batch(values)
        return build_batch(values, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           base_sequence=base_sequence)


def init_producer_id(cluster: LocalCluster, timeout_s: float = 15) -> ProducerIdentity:
    """A producer id from InitProducerId on any broker; no id when no broker hands one out (the
    call is unimplemented, or answers only errors for `timeout_s`)."""
    errors: list[str] = []

    def attempt() -> ProducerIdentity | None:
        for name in cluster.broker_names:
            channel = node_channel(cluster.endpoint(name))
            try:
                reply = broker_pb2_grpc.BrokerServiceStub(channel).InitProducerId(
                    common_pb2.InitProducerIdRequest(transaction_timeout_ms=60000, producer_id=-1,
                                                     producer_epoch=-1), timeout=5)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    return ProducerIdentity()
                errors.append(f"{name}: {exc.code()}")
                continue
            finally:
                channel.close()
            if reply.error_code == 0 and reply.producer_id >= 0:
                return ProducerIdentity(reply.producer_id, reply.producer_epoch)
            errors.append(f"{name}: error {reply.error_code} {reply.error_message}")
        return None

    try:
        return wait_until(attempt, timeout_s, 0.2, message="a producer id from InitProducerId")
    except TimeoutError:
        warnings.warn(f"no broker hands out producer ids ({errors[-3:]})", stacklevel=2)
        return ProducerIdentity()


def admin_for(cluster: LocalCluster) -> Admin:
    return Admin(bootstrap_servers=cluster.bootstrap_servers, **PAUSED_BROKER_CLIENT_CONFIG)


def client_for(cluster: LocalCluster) -> LowLevelClient:
    return LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **PAUSED_BROKER_CLIENT_CONFIG)


def partitions_of(admin: Admin, topic: str) -> dict[int, PartitionInfo]:
    (description,) = admin.describe_topics([topic]).values()
    return {p.partition: p for p in description.partitions}


def metadata_of(cluster: LocalCluster, broker_id: int, topic: str) -> dict[int, PartitionInfo] | None:
    """The topic's partitions as one broker's metadata cache has them; None if it cannot say."""
    channel = node_channel(cluster.endpoint(cluster.broker_name(broker_id)))
    try:
        reply = broker_pb2_grpc.BrokerServiceStub(channel).Metadata(broker_pb2.MetadataRequest(topics=[topic]),
                                                                   timeout=3)
    except grpc.RpcError:
        return None
    finally:
        channel.close()
    found = Cluster.from_response(reply).partitions_for(topic)
    return {p.partition: p for p in found} or None


def wait_for_metadata(cluster: LocalCluster, topic: str, brokers: Iterable[int],
                      condition: Callable[[dict[int, PartitionInfo]], bool], timeout_s: float,
                      message: str) -> dict[int, PartitionInfo]:
    """Waits until every broker in `brokers` answers metadata meeting `condition`, so a broker
    that was paused or restarted cannot answer from a stale cache; returns one broker's view."""
    brokers = sorted(brokers)
    last: dict[int, object] = {}

    def agreed() -> dict[int, PartitionInfo] | None:
        views = {b: metadata_of(cluster, b, topic) for b in brokers}
        last.update(views)
        ok = all(v is not None and condition(v) for v in views.values())
        return views[brokers[0]] if ok else None

    return wait_until(agreed, timeout_s, 0.2, message=lambda: f"{message}; last seen {last}")


def all_brokers(cluster: LocalCluster) -> list[int]:
    return [cluster.services[name].node_id for name in cluster.broker_names]


def wait_for_isr(cluster: LocalCluster, admin: Admin, topic: str, partition: int, isr: set[int],
                 brokers: Iterable[int], timeout_s: float = 30) -> None:
    """Waits until the brokers asked report exactly `isr`, then checks describe_topics agrees."""
    wait_for_metadata(cluster, topic, brokers, lambda v: set(v[partition].isr) == isr, timeout_s,
                      f"ISR of {topic}-{partition} to be {sorted(isr)}")
    assert set(partitions_of(admin, topic)[partition].isr) == isr


def full_isr(view: dict[int, PartitionInfo]) -> bool:
    return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in view.values())


def wait_for_full_isr(cluster: LocalCluster, topic: str, timeout_s: float) -> dict[int, PartitionInfo]:
    return wait_for_metadata(cluster, topic, all_brokers(cluster), full_isr, timeout_s,
                             f"every replica of {topic} in the ISR")


def read_partition(client: LowLevelClient, topic: str, partition: int) -> list[tuple[int, bytes]]:
    """Every record of the partition up to its high watermark, as (offset, value)."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        result = client.fetch(topic, partition, offset, max_wait_ms=0, retry_timeout_ms=15000)
        assert result.error_code == 0, result
        records = [r for r in iter_records(result.records) if r.offset >= offset]
        out += [(r.offset, r.value) for r in records]
        if not records or records[-1].offset + 1 >= result.high_watermark:
            return out
        offset = records[-1].offset + 1


def produce_acked(client: LowLevelClient, topic: str, partition: int, values: list[bytes],
                  acked: list[tuple[int, bytes]], acks: int = -1) -> int:
    """One batch with `acks`; on success its (offset, value)s are added to `acked`."""
    result = client.produce(topic, partition, build_batch(values), acks=acks, timeout_ms=15000,
                            retry_timeout_ms=20000)
    assert result.error_code == 0, result
    acked += [(result.base_offset + i, v) for i, v in enumerate(values)]
    return result.base_offset


def restart_broker(cluster: LocalCluster, broker_id: int, timeout_s: float = 60) -> None:
    """Starts a stopped broker and waits until it serves. Liveness is checked by the pid alone:
    just after a spawn /proc/<pid>/cmdline can still be empty, and the launcher's own wait would
    take that for an early exit."""
    name = cluster.broker_name(broker_id)
    pid = cluster.start_service(name, wait=False)

    def serving() -> bool:
        if not pid_alive(pid):
            raise RuntimeError(f"{name} exited while starting:\n{log_tail(cluster.log_path(name), 40)}")
        return cluster.is_serving(name)

    wait_until(serving, timeout_s, 0.1, message=f"{name} to serve")


@contextmanager
def paused(cluster: LocalCluster, *broker_ids: int) -> Iterator[None]:
    """SIGSTOPs the brokers for the block; SIGCONT on the way out, whatever happens."""
    stopped = []
    try:
        for broker_id in broker_ids:
            cluster.signal_service(cluster.broker_name(broker_id), signal.SIGSTOP)
            stopped.append(broker_id)
        yield
    finally:
        for broker_id in stopped:
            cluster.signal_service(cluster.broker_name(broker_id), signal.SIGCONT)


# --------------------------------------------------------------------------------------------- load

class SteadyProducer(threading.Thread):
    """Writes numbered values to one partition, acks=all, one batch at a time, until stopped.

    A failed batch is retried as the very same bytes (same producer id, epoch and sequence when
    idempotent) for as long as its error is retriable. `acked` holds (offset, value) of every
    acknowledged record in acknowledgement order (offset None when the broker only said the batch
    was a duplicate); `retried` the values of batches sent more than once.
    """

    def __init__(self, cluster: LocalCluster, topic: str, partition: int, identity: ProducerIdentity,
                 stop: threading.Event, batch_records: int = 5, pause_s: float = 0.01) -> None:
        super().__init__(name=f"producer-{topic}-{partition}", daemon=True)
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.identity = identity
        self.stop = stop
        self.batch_records = batch_records
        self.pause_s = pause_s
        self.acked: list[tuple[int | None, bytes]] = []
        self.retried: set[bytes] = set()
        self.errors: collections.Counter[int] = collections.Counter()
        self.failure: str | None = None

    def value(self, number: int) -> bytes:
        return b"p%d-%08d" % (self.partition, number)

    @staticmethod
    def number_of(value: bytes) -> int:
        return int(value.split(b"-")[1])

    def run(self) -> None:
        try:
            with client_for(self.cluster) as client:
                self._produce(client)
        except BaseException as exc:  # reported by the test
            self.failure = repr(exc)

    def _produce(self, client: LowLevelClient) -> None:
        number = 0
        while not self.stop.is_set():
            values = [self.value(number + i) for i in range(self.batch_records)]
            batch = self.identity.batch(values, base_sequence=number)
            attempts = 0
            while True:
                attempts += 1
                if attempts == 2:
                    self.retried.update(values)
                result = client.produce(self.topic, self.partition, batch, acks=-1, timeout_ms=10000,
                                        retry_timeout_ms=3000)
                if result.error_code == 0:
                    self.acked += [(result.base_offset + i, v) for i, v in enumerate(values)]
                    break
                if result.error_code == Errors.DUPLICATE_SEQUENCE_NUMBER and self.identity.idempotent:
                    self.acked += [(None, v) for v in values]
                    break
                self.errors[result.error_code] += 1
                if not error_for_code(result.error_code).retriable:
                    self.failure = f"batch {values[0]!r}.. failed with {result}"
                    return
                if self.stop.wait(0.05):
                    return
            number += len(values)
            self.stop.wait(self.pause_s)


class TailingConsumer(threading.Thread):
    """Reads every partition up to its high watermark, again and again; remembers what it saw."""

    def __init__(self, cluster: LocalCluster, topic: str, partitions: list[int], stop: threading.Event) -> None:
        super().__init__(name=f"consumer-{topic}", daemon=True)
        self.cluster = cluster
        self.topic = topic
        self.stop = stop
        self.positions = {p: 0 for p in partitions}
        self.seen: dict[int, dict[int, bytes]] = {p: {} for p in partitions}
        self.failure: str | None = None

    def run(self) -> None:
        try:
            with client_for(self.cluster) as client:
                while not self.stop.is_set():
                    if not self._poll(client):
                        self.stop.wait(0.05)
        except BaseException as exc:  # reported by the test
            self.failure = repr(exc)

    def _poll(self, client: LowLevelClient) -> bool:
        results = client.fetch_many({(self.topic, p): o for p, o in self.positions.items()},
                                    max_wait_ms=100, retry_timeout_ms=500)
        ok = True
        for tp, result in results.items():
            if result.error_code != 0:
                ok = False
                continue
            for record in iter_records(result.records):
                if record.offset >= self.positions[tp.partition]:
                    self.seen[tp.partition][record.offset] = record.value
                    self.positions[tp.partition] = record.offset + 1
        return ok


# --------------------------------------------------------------------------------------------- tests

def run_steady_load(cluster: LocalCluster, topic: str, partitions: list[int],
                    rounds: Iterable[Callable[[int], None]], config: dict | None = None,
                    replication: int = 3) -> None:
    """Producers and a tailing consumer on `partitions` of a new topic while `rounds` (callables
    taking the round number) disturb the cluster; then every acknowledged record must be in the
    log once, in order, at its acknowledged offset, and seen so by the consumer."""
    identity = init_producer_id(cluster)
    if not identity.idempotent:
        warnings.warn("no producer id from the brokers: the steady producer is not idempotent "
                      "and duplicates of retried batches are allowed", stacklevel=1)
    stop = threading.Event()
    with admin_for(cluster) as admin:
        create_topic(admin, topic, len(partitions), replication, configs=MIN_ISR_CONFIG if config is None else config)
    wait_for_full_isr(cluster, topic, 30)
    producers = [SteadyProducer(cluster, topic, p, identity, stop) for p in partitions]
    consumer = TailingConsumer(cluster, topic, partitions, stop)
    for thread in (*producers, consumer):
        thread.start()
    try:
        for number, disturb in enumerate(rounds):
            _wait_for_progress(producers, consumer)
            disturb(number)
        _wait_for_progress(producers, consumer)
    finally:
        stop.set()
        for thread in (*producers, consumer):
            thread.join(30)
    _assert_running(producers, consumer)

    with client_for(cluster) as client:
        for producer in producers:
            log = read_partition(client, topic, producer.partition)
            print(f"partition {producer.partition}: idempotent={identity.idempotent} log={len(log)} "
                  f"acked={len(producer.acked)} consumed={len(consumer.seen[producer.partition])} "
                  f"retried={len(producer.retried)} errors={dict(producer.errors)}")
            _check_partition(log, producer, consumer.seen[producer.partition])


def kill_leader_round(cluster: LocalCluster, topic: str, partitions: list[int]) -> Callable[[int], None]:
    """A disturbance for `run_steady_load`: round n kills (SIGKILL) the leader of partition n (in
    turn), waits for a new leader, restarts the victim and waits until it is back in every ISR."""

    def kill_leader(number: int) -> None:
        partition = partitions[number % len(partitions)]
        victim = wait_for_full_isr(cluster, topic, 60)[partition].leader
        cluster.kill_service(cluster.broker_name(victim))
        survivors = [b for b in all_brokers(cluster) if b != victim]
        wait_for_metadata(cluster, topic, survivors,
                          lambda v, p=partition, dead=victim: v[p].leader not in (-1, dead),
                          SESSION_TIMEOUT_S + 20, f"a new leader of {topic}-{partition}")
        restart_broker(cluster, victim)
        wait_for_full_isr(cluster, topic, 60)  # the restarted broker is back in every ISR

    return kill_leader


def test_acked_records_survive_repeated_leader_kills(cluster_factory):
    cluster = cluster_factory(broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS})
    topic, partitions = "chaos", [0, 1]
    run_steady_load(cluster, topic, partitions, [kill_leader_round(cluster, topic, partitions)] * 5)


def _wait_for_progress(producers: list[SteadyProducer], consumer: TailingConsumer) -> None:
    marks = [len(p.acked) for p in producers]
    wait_until(lambda: all(len(p.acked) >= m + 20 or p.failure for p, m in zip(producers, marks, strict=True)),
               30, 0.1, message="the producers to make progress")
    _assert_running(producers, consumer)


def _assert_running(producers: list[SteadyProducer], consumer: TailingConsumer) -> None:
    failures = [(t.name, t.failure) for t in (*producers, consumer) if t.failure]
    assert not failures, failures


def _check_partition(log: list[tuple[int, bytes]], producer: SteadyProducer, seen: dict[int, bytes]) -> None:
    partition = producer.partition
    assert [offset for offset, _ in log] == list(range(len(log))), f"gaps in partition {partition}"
    by_offset = dict(log)
    # every acknowledged record is at the offset it was acknowledged at, in acknowledgement order
    known = [(o, v) for o, v in producer.acked if o is not None]
    missing = [(o, v) for o, v in known if by_offset.get(o) != v]
    assert not missing, f"partition {partition}: acknowledged records lost or moved: {missing[:10]}"
    assert [o for o, _ in known] == sorted({o for o, _ in known}), f"partition {partition}: acks out of order"
    # nothing but the producer's values; each value once (idempotent) or, without idempotence,
    # more than once only if its batch was retried; first occurrences in the order they were sent
    counts = collections.Counter(v for _, v in log)
    strangers = [v for v in counts if not v.startswith(b"p%d-" % partition)]
    assert not strangers, strangers[:10]
    duplicated = {v for v, n in counts.items() if n > 1}
    if producer.identity.idempotent:
        assert not duplicated, f"partition {partition}: duplicates {sorted(duplicated)[:10]}"
    else:
        assert duplicated <= producer.retried, sorted(duplicated - producer.retried)[:10]
    acked_values = {v for _, v in producer.acked}
    assert acked_values <= set(counts), sorted(acked_values - set(counts))[:10]
    first_seen = list(dict.fromkeys(v for _, v in log))
    numbers = [producer.number_of(v) for v in first_seen]
    assert numbers == sorted(numbers), f"partition {partition}: records reordered"
    # a consumer never saw a record that later vanished or changed
    changed = [(o, v, by_offset.get(o)) for o, v in seen.items() if by_offset.get(o) != v]
    assert not changed, f"partition {partition}: consumed records that vanished or changed: {changed[:10]}"
    assert len(producer.acked) > 100 and len(seen) > 100, (len(producer.acked), len(seen))


def test_stalled_followers_leave_and_rejoin_the_isr(cluster_factory):
    # sessions outlast the pauses: the leader, not the controller, takes stalled followers out
    cluster = cluster_factory(broker_config={"replica.lag.time.max.ms": LAG_TIME_MAX_MS,
                                             "zookeeper.session.timeout.ms": 30000})
    topic = "lagging"
    acked: list[tuple[int, bytes]] = []
    with admin_for(cluster) as admin, client_for(cluster) as client:
        create_topic(admin, topic, 1, 3, configs=MIN_ISR_CONFIG)
        info = wait_for_full_isr(cluster, topic, 30)[0]
        leader, replicas = info.leader, set(info.replicas)
        first, second = sorted(replicas - {leader})
        produce_acked(client, topic, 0, [b"before-%d" % i for i in range(10)], acked)

        # one follower stalls: it leaves the ISR, and acks=all goes on with two in sync
        with paused(cluster, first):
            produce_acked(client, topic, 0, [b"while-shrinking-%d" % i for i in range(10)], acked)
            wait_for_isr(cluster, admin, topic, 0, replicas - {first}, [leader, second])
            for round_ in range(3):
                produce_acked(client, topic, 0, [b"two-in-sync-%d-%d" % (round_, i) for i in range(10)], acked)
        wait_for_isr(cluster, admin, topic, 0, replicas, replicas)
        produce_acked(client, topic, 0, [b"rejoined-%d" % i for i in range(10)], acked)

        # two followers stall: acks=all is refused once the ISR is down to the leader
        with paused(cluster, first, second):
            in_flight = client.produce(topic, 0, build_batch([b"in-flight"]), acks=-1, timeout_ms=15000,
                                       retry_timeout_ms=20000)
            assert in_flight.error_code in (Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                             Errors.REQUEST_TIMED_OUT), in_flight
            wait_for_isr(cluster, admin, topic, 0, {leader}, [leader])
            refused = client.produce(topic, 0, build_batch([b"refused"]), acks=-1, timeout_ms=15000,
                                     retry_timeout_ms=20000)
            assert refused.error_code == Errors.NOT_ENOUGH_REPLICAS, refused
            produce_acked(client, topic, 0, [b"acks-1-alone-%d" % i for i in range(5)], acked, acks=1)
        wait_for_isr(cluster, admin, topic, 0, replicas, replicas)
        produce_acked(client, topic, 0, [b"after-%d" % i for i in range(10)], acked)

        by_offset = dict(read_partition(client, topic, 0))
        assert b"refused" not in by_offset.values()
        lost = [(o, v) for o, v in acked if by_offset.get(o) != v]
        assert not lost, lost


def delayed_fetches(metrics_port: int) -> float:
    """The broker's count of fetches parked in its purgatory, from its Prometheus endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("odradek_delayed_operation_purgatory_num_delayed_operations{") \
                    and 'delayed_operation="Fetch"' in line:
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no odradek_delayed_operation_purgatory_num_delayed_operations metric")


def batch_fingerprints(log_dir: Path) -> list[tuple[int, int, int]]:
    """(base offset, last offset delta, CRC) of every batch in a partition directory's segments."""
    out = []
    for segment in sorted(log_dir.glob("*.log")):
        data = segment.read_bytes()
        for position, _size in iter_batch_positions(data):
            header = parse_header(data, position)
            out.append((header.base_offset, header.last_offset_delta, header.crc))
    return out


def test_partitioned_leader_truncates_its_divergent_tail(cluster_factory):
    # a long lag time: followers paused for a moment must stay in the ISR; a long fetch wait: a
    # follower's fetch, once parked on the leader, stays there until it is paused
    cluster = cluster_factory(broker_config={"replica.lag.time.max.ms": 10000, "replica.fetch.wait.max.ms": 4000},
                              start=False)
    metrics_ports = {}
    for name in cluster.broker_names:
        metrics_ports[name] = free_port()
        cluster.services[name].config["metrics.port"] = str(metrics_ports[name])
    cluster.start()
    topic = "diverging"
    committed: list[tuple[int, bytes]] = []
    with admin_for(cluster) as admin, client_for(cluster) as client:
        create_topic(admin, topic, 1, 3, configs=MIN_ISR_CONFIG)
        info = wait_for_full_isr(cluster, topic, 30)[0]
        old_leader, followers = info.leader, sorted(set(info.replicas) - {info.leader})
        for round_ in range(3):
            produce_acked(client, topic, 0, [b"committed-%d-%d" % (round_, i) for i in range(10)], committed)
        wait_for_full_isr(cluster, topic, 30)
        tail: list[tuple[int, bytes]] = []
        leader_port = metrics_ports[cluster.broker_name(old_leader)]
        # pause the followers while both their fetches are parked on the leader: then no fetch of
        # theirs is on its way to the leader (one would carry the unreplicated tail back)
        wait_until(lambda: delayed_fetches(leader_port) == len(followers), 20, 0.05,
                   message="both followers' fetches to be parked on the leader")
        with paused(cluster, *followers):
            # once the followers' parked fetches have expired, nothing new can reach them
            zeros = []
            wait_until(lambda: zeros.append(delayed_fetches(leader_port) == 0) or zeros[-3:] == [True] * 3,
                       10, 0.15, message="the paused followers' fetches to expire on the leader")
            for round_ in range(3):
                produce_acked(client, topic, 0, [b"unreplicated-%d-%d" % (round_, i) for i in range(10)],
                              tail, acks=1)
            cluster.signal_service(cluster.broker_name(old_leader), signal.SIGSTOP)
        try:
            assert tail[0][0] == len(committed)
            wait_for_metadata(cluster, topic, followers, lambda v: v[0].leader in followers,
                              SESSION_TIMEOUT_S + 20, "a follower to be elected leader")
            # a request to the paused broker would hang until its deadline: learn the new leader first
            assert client.partitions_for(topic)[0].leader in followers
            new_records: list[tuple[int, bytes]] = []
            base = produce_acked(client, topic, 0, [b"new-leader-0-%d" % i for i in range(10)], new_records)
            assert base == len(committed), "the new leader has the old leader's unreplicated tail"
            for round_ in range(1, 3):
                produce_acked(client, topic, 0, [b"new-leader-%d-%d" % (round_, i) for i in range(10)],
                              new_records)
        finally:
            cluster.signal_service(cluster.broker_name(old_leader), signal.SIGCONT)
        wait_for_full_isr(cluster, topic, 60)
        # acknowledged by a full ISR: every replica holds every batch up to here
        produce_acked(client, topic, 0, [b"final-%d" % i for i in range(10)], new_records)
        log = read_partition(client, topic, 0)
        assert log == committed + new_records

    for name in cluster.broker_names:
        cluster.stop_service(name)
    fingerprints = {name: batch_fingerprints(cluster.data_dir(name) / f"{topic}-0") for name in cluster.broker_names}
    reference = fingerprints[cluster.broker_name(old_leader)]
    assert len(reference) == 3 + 3 + 1
    assert [f[0] for f in reference] == [i * 10 for i in range(7)]
    for name, batches in fingerprints.items():
        assert batches == reference, (name, batches, reference)
