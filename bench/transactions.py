"""Benchmark: what transactions cost the producer and the read_committed consumer, on three brokers.

Starts its own cluster (ZooKeeper, one controller, three brokers, one coordinator; the
`LocalCluster` launcher, free ports, a temp dir) and measures in the same run:

1. Produce throughput of the Python `Producer` at full speed, `--records` records of 100 bytes,
   no key (spread by the sticky partitioner), to three-partition topics with replication factor 3
   and `min.insync.replicas`=2: the idempotent producer (its defaults: acks=all, idempotent, no
   transactions) beside a transactional producer committing every 100 records and one committing
   every 10,000 records (begin, sends, commit; the time includes every commit). Each mode writes
   its own topic; rounds alternate the order of the modes. Printed: records/s, MB/s of values,
   the ratio to the idempotent producer of the same round and, for the transactional ones,
   transactions/s (target: 250 transactions of 100 records a second). One idempotent round
   before them is not counted (the first writes to a new cluster are slower).
2. Where one transaction's time goes (`--steps`, transactions of 100 records): each transaction
   timed in two parts, its records' flush (the AddPartitionsToTxn, which the coordinator answers
   once the previous transaction's COMMIT markers and its CompleteCommit with the new Ongoing are
   replicated, then the acks=all produce of the records) and `commit_transaction` (EndTxn, answered
   once PrepareCommit is replicated); beside them, in the same run, the idempotent producer's
   acks=all batch of 100 records, flushed one at a time (one replicated write). Printed: mean and
   p50 of each, and a transaction in acks=all batches.
3. Consumer throughput over the same data: the topics the transactional producers wrote (data
   batches with a COMMIT marker after each transaction on each partition it touched), read from
   the beginning to the end by `Consumer.poll()` with isolation.level=read_committed beside
   read_uncommitted, alternating, each record's value read. Printed: records/s, MB/s and the ratio
   read_committed / read_uncommitted.

    python bench/transactions.py [--records 100000] [--rounds 3] [--read-rounds 3] [--steps 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from replication import producer_rate  # noqa: E402  (bench/replication.py: one plain producer loop)

from services.clients.admin import Admin  # noqa: E402
from services.clients.admin_types import NewTopic  # noqa: E402
from services.clients.consumer import Consumer  # noqa: E402
from services.clients.producer import Producer  # noqa: E402
from services.common.topic_partition import TopicPartition  # noqa: E402
from services.devcluster.launcher import LocalCluster  # noqa: E402
from services.devcluster.proc import wait_until  # noqa: E402

SESSION_TIMEOUT_MS = 6000
PARTITIONS = 3
RECORD_BYTES = 100
IDEMPOTENT = "idempotent"
TRANSACTION_SIZES = (100, 10_000)
CLIENT_CONFIG = {"request_timeout_ms": 10000, "retry_backoff_ms": 50}
TARGET_TRANSACTIONS_PER_S = 250
STEP_WARM_UP = 20
STEPS_TXN_TOPIC = "bench-steps-txn"  # topics of their own: the consumers read the others
STEPS_IDEMPOTENT_TOPIC = "bench-steps-idempotent"


def mode_topic(mode: str) -> str:
    return f"bench-{mode}"


def txn_mode(records_per_txn: int) -> str:
    return f"txn-{records_per_txn}"


def produce_rate(bootstrap: str, mode: str, values: list[bytes], round_index: int) -> float:
    """Records/s of one Producer writing `values` in `mode` (idempotent, or transactions of a size)."""
    topic = mode_topic(mode)
    if mode == IDEMPOTENT:
        return producer_rate(bootstrap, topic, values, **CLIENT_CONFIG)
    per_txn = int(mode.split("-")[1])
    with Producer(bootstrap_servers=bootstrap, transactional_id=f"bench-{mode}-{round_index}", max_block_ms=60000,
                  **CLIENT_CONFIG) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"warm-up")
        producer.commit_transaction()
        send = producer.send
        start = time.perf_counter()
        for first in range(0, len(values), per_txn):
            producer.begin_transaction()
            for value in values[first:first + per_txn]:
                send(topic, value)
            producer.commit_transaction()
        return len(values) / (time.perf_counter() - start)


def step_times(bootstrap: str, transactions: int) -> dict[str, list[float]]:
    """ms of each step of `transactions` transactions of 100 records, then of as many acks=all
    batches of 100 records of the idempotent producer (see the module docstring)."""
    values = [os.urandom(RECORD_BYTES) for _ in range(TRANSACTION_SIZES[0])]
    steps: dict[str, list[float]] = {"records' flush": [], "commit": [], "transaction": [], "acks=all batch": []}
    with Producer(bootstrap_servers=bootstrap, transactional_id="bench-steps", max_block_ms=60000,
                  **CLIENT_CONFIG) as producer:
        producer.init_transactions()
        for index in range(STEP_WARM_UP + transactions):
            start = time.perf_counter()
            producer.begin_transaction()
            for value in values:
                producer.send(STEPS_TXN_TOPIC, value)
            flushing = time.perf_counter()
            producer.flush()
            committing = time.perf_counter()
            producer.commit_transaction()
            end = time.perf_counter()
            if index >= STEP_WARM_UP:
                steps["records' flush"].append((committing - flushing) * 1000)
                steps["commit"].append((end - committing) * 1000)
                steps["transaction"].append((end - start) * 1000)
    with Producer(bootstrap_servers=bootstrap, **CLIENT_CONFIG) as producer:
        for index in range(STEP_WARM_UP + transactions):
            start = time.perf_counter()
            for value in values:
                producer.send(STEPS_IDEMPOTENT_TOPIC, value)
            producer.flush()
            if index >= STEP_WARM_UP:
                steps["acks=all batch"].append((time.perf_counter() - start) * 1000)
    return steps


def measure_steps(bootstrap: str, args) -> None:
    print(f"steps: {args.steps} transactions of {TRANSACTION_SIZES[0]} records, then {args.steps} acks=all batches "
          f"of {TRANSACTION_SIZES[0]} records of the idempotent producer, after {STEP_WARM_UP} of each not counted")
    steps = step_times(bootstrap, args.steps)
    for name, times in steps.items():
        print(f"  {name:<15}: mean {statistics.fmean(times):6.2f} ms, p50 {statistics.median(times):6.2f} ms")
    batch = statistics.fmean(steps["acks=all batch"])
    print(f"  a transaction takes {statistics.fmean(steps['transaction']) / batch:.2f} acks=all batches "
          f"({1000 / statistics.fmean(steps['transaction']):.1f} transactions/s)")


def consume_rate(bootstrap: str, topic: str, isolation_level: str) -> tuple[float, int]:
    """(records/s, records) of one Consumer reading `topic` from its beginning to its end."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation_level, **CLIENT_CONFIG) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got = 0
        start = time.perf_counter()
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for record in consumer.poll(timeout_ms=500):
                record.value  # noqa: B018 - each record is read
                got += 1
        return got / (time.perf_counter() - start), got


def megabytes_per_s(records_per_s: float) -> float:
    return records_per_s * RECORD_BYTES / 1e6


def measure_produce(bootstrap: str, args) -> None:
    values = [os.urandom(RECORD_BYTES) for _ in range(args.records)]
    modes = [IDEMPOTENT, *(txn_mode(size) for size in TRANSACTION_SIZES)]
    print(f"produce: {len(values):,} records x {RECORD_BYTES} B per mode and round, no key, acks=all RF=3, "
          f"{args.rounds} rounds alternating the order of the modes, after one idempotent round not counted")
    produce_rate(bootstrap, IDEMPOTENT, values, -1)  # warm-up: connections, segment files
    for round_index in range(args.rounds):
        order = modes if round_index % 2 == 0 else list(reversed(modes))
        rates = {mode: produce_rate(bootstrap, mode, values, round_index) for mode in order}
        for mode in modes:
            ratio = rates[mode] / rates[IDEMPOTENT]
            per_txn = "" if mode == IDEMPOTENT else f", {rates[mode] / int(mode.split('-')[1]):,.1f} transactions/s"
            print(f"  round {round_index + 1}, {mode:<10}: {rates[mode]:>9,.0f} records/s "
                  f"{megabytes_per_s(rates[mode]):>6.2f} MB/s, {ratio:.3f}x idempotent{per_txn}")
    print(f"  target: >= {TARGET_TRANSACTIONS_PER_S} transactions of 100 records/s for one transactional producer")


def measure_consume(bootstrap: str, args) -> None:
    print(f"consume: each transactional topic from beginning to end, {args.read_rounds} rounds "
          "alternating read_committed and read_uncommitted")
    for size in TRANSACTION_SIZES:
        topic = mode_topic(txn_mode(size))
        for round_index in range(args.read_rounds):
            levels = ["read_committed", "read_uncommitted"]
            if round_index % 2:
                levels.reverse()
            results = {level: consume_rate(bootstrap, topic, level) for level in levels}
            (committed, count_c), (uncommitted, count_u) = results["read_committed"], results["read_uncommitted"]
            print(f"  {topic}, round {round_index + 1}: read_committed {committed:>9,.0f} records/s "
                  f"{megabytes_per_s(committed):>6.2f} MB/s ({count_c:,} records), read_uncommitted "
                  f"{uncommitted:>9,.0f} records/s {megabytes_per_s(uncommitted):>6.2f} MB/s ({count_u:,} records), "
                  f"ratio {committed / uncommitted:.2f}x")


def create_topics(admin: Admin, steps: bool) -> None:
    topics = [mode_topic(IDEMPOTENT), *(mode_topic(txn_mode(size)) for size in TRANSACTION_SIZES)]
    if steps:
        topics += [STEPS_TXN_TOPIC, STEPS_IDEMPOTENT_TOPIC]
    admin.create_topics([NewTopic(t, PARTITIONS, 3, configs={"min.insync.replicas": "2"}) for t in topics])
    for topic in topics:
        admin.wait_for_topic(topic, 60, partitions=PARTITIONS)

        def fully_replicated(t: str = topic) -> bool:
            (description,) = admin.describe_topics([t]).values()
            return all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in description.partitions)

        wait_until(fully_replicated, 60, 0.2, message=f"every replica of {topic} in the ISR")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per mode and round")
    parser.add_argument("--rounds", type=int, default=3, help="produce rounds")
    parser.add_argument("--read-rounds", type=int, default=3, help="consume rounds per topic")
    parser.add_argument("--steps", type=int, default=0,
                        help="transactions (and acks=all batches) to time step by step; 0: none")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        session = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, controllers=1, coordinators=1, free_ports=True,
                               broker_config={**session, "log.segment.bytes": 1 << 30},
                               controller_config=session, coordinator_config=session)
        try:
            cluster.start()
            print(f"cluster: 3 brokers, 1 controller, 1 coordinator, {os.cpu_count()} CPUs")
            with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
                create_topics(admin, args.steps > 0)
            measure_produce(cluster.bootstrap_servers, args)
            if args.steps:
                measure_steps(cluster.bootstrap_servers, args)
            measure_consume(cluster.bootstrap_servers, args)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
