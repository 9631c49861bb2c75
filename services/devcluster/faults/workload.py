"""The workload of a fault run, on Odradek's own clients, every operation recorded in a `History`:

- `producers` idempotent acks=all producers, each sending unique values `<name>:<sequence>`
  round-robin over the partitions of one RF=3, min.insync.replicas=2 topic; and, given the
  brokers' Kafka listeners and where confluent-kafka is installed, `kafka_producers` more of
  librdkafka's (`kafka-producer-<n>`) over Kafka's protocol;
- `consumers` members of one group reading along (read_uncommitted) and committing after each
  poll that returned records, their rebalances recorded;
- with `transactions`, a transactional producer whose transactions each hold a known list of
  values (every third one aborted on purpose) and a read_committed member of another group
  (process `committed-reader-1`).

`run_with_faults` runs it beside a fault schedule and checks the result. After the faults heal,
`time_to_recover` measures how long until a produce succeeds on every partition, `stop` ends the
clients, and `full_read` reads every partition from its start.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.consumer import Consumer, ConsumerRebalanceListener
from services.clients.producer import Producer
from services.common.topic_partition import TopicPartition
from services.devcluster.faults.checker import ReadRecord, Result, check, read_leadership
from services.devcluster.faults.history import (
    CRASHED,
    FAIL,
    FAILED,
    HEAL,
    INFO,
    INVOKE,
    NEMESIS,
    OK,
    History,
    make_value,
)
from services.devcluster.launcher import LocalCluster

logger = logging.getLogger(__name__)

COMMITTED_READER = "committed-reader-1"


@dataclass(frozen=True)
class WorkloadConfig:
    topic: str = "faults"
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    producers: int = 2
    kafka_producers: int = 1
    consumers: int = 2
    transactions: bool = True
    send_interval_s: float = 0.01  # per producer
    records_per_transaction: int = 4
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 30000
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 10000


class Workload:
    """The clients of one fault run against `bootstrap_servers`, recording into `history`."""

    def __init__(self, bootstrap_servers: str, history: History, config: WorkloadConfig = WorkloadConfig(),
                 kafka_bootstrap_servers: str | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.kafka_bootstrap_servers = kafka_bootstrap_servers
        self.history = history
        self.config = config
        self._stopping = threading.Event()
        self._producing_stopped = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # unexpected exceptions of the workload's threads

    # ------------------------------------------------------------------ set-up and life cycle

    def create_topic(self, timeout_s: float = 30.0) -> None:
        config = self.config
        with Admin(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=config.request_timeout_ms) as admin:
            admin.create_topics([NewTopic(config.topic, config.partitions, config.replication_factor,
                                          configs={"min.insync.replicas": str(config.min_insync_replicas)})])
            admin.wait_for_topic(config.topic, timeout_s, partitions=config.partitions)

    def start(self) -> None:
        for index in range(1, self.config.producers + 1):
            self._spawn(f"producer-{index}", self._produce)
        if self.kafka_bootstrap_servers and _confluent_kafka() is not None:
            for index in range(1, self.config.kafka_producers + 1):
                self._spawn(f"kafka-producer-{index}", self._produce_over_kafka_protocol)
        for index in range(1, self.config.consumers + 1):
            self._spawn(f"consumer-{index}", self._consume, "read_uncommitted", f"{self.config.topic}-readers")
        if self.config.transactions:
            self._spawn("txn-1", self._transact)
            self._spawn(COMMITTED_READER, self._consume, "read_committed", f"{self.config.topic}-committed-readers")

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stops producing (waiting for what was sent), lets the consumers read a moment longer,
        then stops them."""
        self._producing_stopped.set()
        deadline = time.monotonic() + timeout_s
        producers = [t for t in self._threads if not t.name.startswith(("consumer", COMMITTED_READER))]
        for thread in producers:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._stopping.wait(2.0)
        self._stopping.set()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            self.errors.append(f"still running after {timeout_s:g} s: {alive}")

    def _spawn(self, name: str, target: Callable[..., None], *args: object) -> None:
        def run() -> None:
            try:
                target(name, *args)
            except BaseException as exc:  # reported by the run
                logger.exception("%s failed", name)
                self.errors.append(f"{name}: {exc!r}")

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _client_settings(self) -> dict[str, object]:
        return {"bootstrap_servers": self.bootstrap_servers, "request_timeout_ms": self.config.request_timeout_ms,
                "retry_backoff_ms": 50}

    # ------------------------------------------------------------------ producers

    def _producer(self, **settings: object) -> Producer:
        return Producer(**self._client_settings(), acks="all", enable_idempotence=True, linger_ms=5,
                        delivery_timeout_ms=self.config.delivery_timeout_ms, max_block_ms=10000, **settings)

    def _send(self, producer: Producer, name: str, value: bytes, partition: int) -> None:
        """One recorded send: `ok` with its offset when acknowledged, `info` when it failed after
        leaving (it may have been written), `fail` when `send` refused it."""
        history = self.history

        def answered(metadata, error) -> None:
            if error is None:
                history.add(name, OK, "send", value, metadata.partition, metadata.offset)
            else:
                history.add(name, INFO, "send", value, partition)

        history.add(name, INVOKE, "send", value, partition)
        try:
            producer.send(self.config.topic, value, partition=partition, callback=answered)
        except Exception as exc:  # refused before it was queued
            history.add(name, FAIL, "send", value, partition)
            logger.debug("%s: send refused: %s", name, exc)

    def _produce(self, name: str) -> None:
        producer = self._producer()
        sequence = 0
        try:
            while not self._producing_stopped.is_set():
                self._send(producer, name, make_value(name, sequence), sequence % self.config.partitions)
                sequence += 1
                self._producing_stopped.wait(self.config.send_interval_s)
        finally:
            producer.close(self.config.delivery_timeout_ms / 1000)

    def _produce_over_kafka_protocol(self, name: str) -> None:
        """As `_produce`, with librdkafka's idempotent acks=all producer on the Kafka listeners."""
        kafka = _confluent_kafka()
        config = self.config
        producer = kafka.Producer({
            "bootstrap.servers": self.kafka_bootstrap_servers, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": config.delivery_timeout_ms,
            "request.timeout.ms": config.request_timeout_ms, "retry.backoff.ms": 50,
            "topic.metadata.refresh.interval.ms": 1000})
        history = self.history

        def answered(error, message) -> None:
            if error is None:
                history.add(name, OK, "send", message.value(), message.partition(), message.offset())
            else:
                history.add(name, INFO, "send", message.value(), message.partition())

        sequence = 0
        try:
            while not self._producing_stopped.is_set():
                value, partition = make_value(name, sequence), sequence % config.partitions
                history.add(name, INVOKE, "send", value, partition)
                try:
                    producer.produce(config.topic, value, partition=partition, on_delivery=answered)
                except (BufferError, kafka.KafkaException):
                    history.add(name, FAIL, "send", value, partition)
                sequence += 1
                producer.poll(0)
                self._producing_stopped.wait(config.send_interval_s)
        finally:
            producer.flush(config.delivery_timeout_ms / 1000)

    def _transact(self, name: str) -> None:
        """Transactions of `records_per_transaction` values over the partitions: committed, or
        (every third) aborted on purpose; after an error, `info` (unknown outcome) and a new
        producer, whose init_transactions ends what was left open."""
        config = self.config
        sequence, number = 0, 0
        producer: Producer | None = None
        try:
            while not self._producing_stopped.is_set():
                if producer is None:
                    producer = self._producer(transactional_id=f"{config.topic}-{name}",
                                              transaction_timeout_ms=config.transaction_timeout_ms)
                    try:
                        producer.init_transactions()
                    except Exception as exc:
                        logger.info("%s: init_transactions failed: %s", name, exc)
                        producer.close(0)
                        producer = None
                        self._producing_stopped.wait(0.5)
                        continue
                values = [make_value(name, sequence + i) for i in range(config.records_per_transaction)]
                sequence += len(values)
                number += 1
                abort = number % 3 == 0
                self.history.add(name, INVOKE, "txn", values)
                try:
                    producer.begin_transaction()
                    for index, value in enumerate(values):
                        producer.send(config.topic, value, partition=index % config.partitions)
                    if abort:
                        producer.flush(config.delivery_timeout_ms / 1000)  # the values reach the log first
                        producer.abort_transaction()
                    else:
                        producer.commit_transaction()
                    self.history.add(name, FAIL if abort else OK, "txn", values)
                except Exception as exc:
                    self.history.add(name, INFO, "txn", values)
                    logger.info("%s: transaction %d ended by %s", name, number, exc)
                    producer.close(0)
                    producer = None
                self._producing_stopped.wait(config.send_interval_s * 5)
        finally:
            if producer is not None:
                producer.close(config.delivery_timeout_ms / 1000)

    # ------------------------------------------------------------------ consumers

    def _consume(self, name: str, isolation_level: str, group_id: str) -> None:
        history = self.history

        class Recorder(ConsumerRebalanceListener):
            def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
                history.add(name, INFO, "revoked", [tp.partition for tp in partitions])

            def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
                history.add(name, INFO, "assigned", [tp.partition for tp in partitions])

        consumer = Consumer(**self._client_settings(), group_id=group_id, auto_offset_reset="earliest",
                            enable_auto_commit=False, isolation_level=isolation_level,
                            session_timeout_ms=self.config.session_timeout_ms, heartbeat_interval_ms=1000)
        try:
            consumer.subscribe([self.config.topic], listener=Recorder())
            while not self._stopping.is_set():
                history.add(name, INVOKE, "poll")
                try:
                    records = consumer.poll(timeout_ms=200)
                except Exception as exc:
                    history.add(name, FAIL, "poll", repr(exc))
                    self._stopping.wait(0.2)
                    continue
                read = [(r.partition, r.offset, r.value) for r in records]
                history.add(name, OK, "poll", read)
                if read:
                    self._commit(consumer, name)
        finally:
            consumer.close(5)

    def _commit(self, consumer: Consumer, name: str) -> None:
        self.history.add(name, INVOKE, "commit")
        try:
            consumer.commit_sync()
        except Exception as exc:
            self.history.add(name, FAIL, "commit", repr(exc))
        else:
            self.history.add(name, OK, "commit")

    # ------------------------------------------------------------------ after the faults

    def time_to_recover(self, healed_at_s: float, timeout_s: float = 60.0) -> float | None:
        """Seconds from `healed_at_s` (monotonic) until one acks=all produce succeeded on every
        partition (each recorded as process `probe`); None if that took over `timeout_s`."""
        pending = set(range(self.config.partitions))
        deadline = time.monotonic() + timeout_s
        sequence = 0
        with self._producer() as producer:
            while pending and time.monotonic() < deadline:
                for partition in sorted(pending):
                    value = make_value("probe", sequence)
                    sequence += 1
                    self.history.add("probe", INVOKE, "send", value, partition)
                    try:
                        metadata = producer.send(self.config.topic, value, partition=partition).get(
                            self.config.request_timeout_ms / 1000)
                    except Exception:
                        self.history.add("probe", INFO, "send", value, partition)
                        continue
                    self.history.add("probe", OK, "send", value, metadata.partition, metadata.offset)
                    pending.discard(partition)
        return None if pending else time.monotonic() - healed_at_s

    def full_read(self, isolation_level: str = "read_uncommitted",
                  timeout_s: float = 60.0) -> dict[int, list[ReadRecord]]:
        """Every record of every partition from its start up to its end (the high watermark; at
        read_committed, once no transaction is open, the last stable offset equals it)."""
        partitions = [TopicPartition(self.config.topic, p) for p in range(self.config.partitions)]
        deadline = time.monotonic() + timeout_s
        read: dict[int, list[ReadRecord]] = {p.partition: [] for p in partitions}
        with Consumer(**self._client_settings(), isolation_level=isolation_level,
                      enable_auto_commit=False) as consumer:
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            ends = consumer.end_offsets(partitions)
            if isolation_level == "read_committed":
                with Consumer(**self._client_settings()) as plain:
                    high_watermarks = plain.end_offsets(partitions)
                while ends != high_watermarks and time.monotonic() < deadline:  # a transaction still open
                    time.sleep(0.2)
                    ends = consumer.end_offsets(partitions)
            while any(consumer.position(tp) < ends[tp] for tp in partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"full read of {self.config.topic} at {isolation_level}: "
                                       f"{ {tp.partition: consumer.position(tp) for tp in partitions} } of {ends}")
                for record in consumer.poll(timeout_ms=200):
                    read[record.partition].append(ReadRecord(
                        record.offset, record.value, -1 if record.leader_epoch is None else record.leader_epoch))
        return read


def _confluent_kafka():
    """The confluent_kafka module (librdkafka's Python client), or None where it is not installed."""
    try:
        import confluent_kafka
    except ImportError:
        return None
    return confluent_kafka


RunSchedule = Callable[..., object]  # run_schedule(cluster, schedule, stop_event[, on_fault=...])
# Ops of a schedule's records that undo a fault rather than make one.
UNDO_KINDS = frozenset({HEAL, "unlink", "resume", "restart", "unskew"})


def apply_schedule(cluster: LocalCluster, schedule: object, run_schedule: RunSchedule,
                   stop_event: threading.Event, history: History) -> None:
    """Runs the schedule, its faults recorded as `nemesis` ops as they happen: when `run_schedule`
    takes `on_record` (the nemesis's runner), from each record (an `op` of a `kind`, and `ok`), the
    undoing ones as `heal` and the failed ones as `failed`; when it takes `on_fault(action, target)`,
    as it says; else, after it, from the records it returns."""
    parameters = inspect.signature(run_schedule).parameters
    if "on_record" in parameters:
        run_schedule(cluster, schedule, stop_event, on_record=lambda record: _record_op(history, record))
        return
    if "on_fault" in parameters:
        run_schedule(cluster, schedule, stop_event,
                     on_fault=lambda action, target: history.add(NEMESIS, INFO, action, target))
        return
    for record in run_schedule(cluster, schedule, stop_event) or ():
        _record_op(history, record)


def _record_op(history: History, record: object) -> None:
    op = getattr(record, "op", record)
    kind = getattr(op, "kind", str(op))
    if not getattr(record, "ok", True):
        history.add(NEMESIS, INFO, FAILED, str(record))
    else:
        history.add(NEMESIS, INFO, HEAL if kind in UNDO_KINDS else kind, str(op))


def run_with_faults(cluster: LocalCluster, schedule: object, run_schedule: RunSchedule,
                    config: WorkloadConfig = WorkloadConfig(), history_path: Path | None = None) -> Result:
    """One fault run: the workload on a new topic of `cluster`, `run_schedule(cluster, schedule,
    stop_event, on_fault=...)` until the schedule ends, then the time to recover and (every broker
    serving again) the full reads and the verdicts. The history is saved to `history_path` if given."""
    history = History()
    workload = Workload(cluster.bootstrap_servers, history, config, cluster.kafka_bootstrap_servers or None)
    workload.create_topic()
    workload.start()
    stop_event = threading.Event()
    try:
        _wait_for_acknowledgements(history, config.partitions, timeout_s=30)
        apply_schedule(cluster, schedule, run_schedule, stop_event, history)
        recovery_s = workload.time_to_recover(time.monotonic())
        for name in cluster.broker_names:
            if cluster.running_pid(name) is None:  # died after its last start
                history.add(NEMESIS, INFO, CRASHED, name)
                cluster.start_service(name, wait=False)
        for name in cluster.broker_names:
            cluster.wait_serving(name, timeout_s=60)
    finally:
        stop_event.set()
        workload.stop()
    if history_path is not None:
        history.save(history_path)
    full = workload.full_read("read_uncommitted")
    committed = workload.full_read("read_committed") if config.transactions else None
    leadership = read_leadership(cluster.log_path(name) for name in cluster.broker_names)
    result = check(history, full, committed, leadership, topic=config.topic)
    result.recovery_s = recovery_s
    result.errors = list(workload.errors)
    return result


def _wait_for_acknowledgements(history: History, count: int, timeout_s: float) -> None:
    """Until `count` sends were acknowledged: the workload runs before the first fault."""
    deadline = time.monotonic() + timeout_s
    while sum(1 for op in history.ops if op.f == "send" and op.type == OK) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {count} acknowledged sends within {timeout_s:g} s")
        time.sleep(0.1)
