"""A transactional producer in a process of its own that keeps a history of its transactions, for
the read_committed linearizability check.

    python -m tests.integration.txn_history_writer --bootstrap B --topic T --partitions N
        --name W --history FILE [--seed S] [--commit-ratio 0.7] [--max-transactions 0]

It writes transactions numbered 0, 1, ... with transactional id `W`: each sends a few records to
each of a few random partitions, the value of record `i` of transaction `n` on partition `p` being
`W:n:i:p` (ASCII), then commits or aborts at random. Until SIGTERM (or `--max-transactions`).

The history file is JSON lines, two per transaction: first
`{"txn": n, "intent": "commit"|"abort", "records": [[p, i], ...]}` before it begins,
then `{"txn": n, "outcome": "committed"|"aborted"|"unsure", "error": ...}`. A transaction is
aborted when its end was never asked to commit (an abort, or a send that failed), committed when
commit_transaction returned, and unsure when commit_transaction raised (or the process died
between the lines). After an error that leaves the producer unusable it is closed and a new one
with the same transactional id starts (its init_transactions ends whatever was open).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import threading
from typing import IO

from services.clients.producer import Producer
from services.clients.producer.errors import KafkaTimeoutError
from services.common.errors import KafkaError

COMMIT_RETRIES = 3


def record_value(name: str, txn: int, index: int, partition: int) -> bytes:
    return f"{name}:{txn}:{index}:{partition}".encode()


def plan(rng: random.Random, partitions: int) -> list[tuple[int, int]]:
    """(partition, index) of each record of one transaction, in send order: 2-3 partitions,
    2-4 records on each, interleaved."""
    chosen = rng.sample(range(partitions), min(partitions, rng.randint(2, 3)))
    per_partition = {p: rng.randint(2, 4) for p in chosen}
    order = [p for p in chosen for _ in range(per_partition[p])]
    rng.shuffle(order)
    return [(p, i) for i, p in enumerate(order)]


class HistoryWriter:
    def __init__(self, args: argparse.Namespace, history: IO[str], stop: threading.Event) -> None:
        self.args = args
        self.stop = stop
        self.history = history
        self.rng = random.Random(args.seed)
        self.producer: Producer | None = None

    def log(self, **line) -> None:
        self.history.write(json.dumps(line) + "\n")
        self.history.flush()

    def new_producer(self, stop: threading.Event) -> None:
        """Closes the current producer and starts one with the same transactional id, retrying
        init_transactions (a coordinator may be failing over) until it succeeds or `stop` is set."""
        if self.producer is not None:
            self.producer.close(2)
            self.producer = None
        while not stop.is_set():
            producer = Producer(bootstrap_servers=self.args.bootstrap, transactional_id=self.args.name,
                                request_timeout_ms=5000, retry_backoff_ms=50, max_block_ms=20000,
                                transaction_timeout_ms=15000, linger_ms=2)
            try:
                producer.init_transactions()
            except KafkaError:
                producer.close(2)
                continue
            self.producer = producer
            return

    def run_one(self, txn: int) -> None:
        """One transaction; raises KafkaError when begin or send refused (nothing asked to commit)."""
        producer = self.producer
        records = plan(self.rng, self.args.partitions)
        intent = "commit" if self.rng.random() < self.args.commit_ratio else "abort"
        self.log(txn=txn, intent=intent, records=records)
        producer.begin_transaction()
        futures = [producer.send(self.args.topic, record_value(self.args.name, txn, i, p), partition=p)
                   for p, i in records]
        producer.flush(20)
        failed = next((f.exception(0) for f in futures if not f.done() or f.exception(0)), None)
        if failed is not None or intent == "abort":
            self.abort(txn, failed)
        else:
            self.commit(txn)

    def abort(self, txn: int, cause: BaseException | None) -> None:
        try:
            self.producer.abort_transaction()
            self.log(txn=txn, outcome="aborted", error=cause and repr(cause))
        except KafkaError as error:  # never asked to commit: aborted by the next producer or the timeout
            self.log(txn=txn, outcome="aborted", error=repr(error))
            self.new_producer(self.stop)

    def commit(self, txn: int) -> None:
        for _ in range(COMMIT_RETRIES):
            try:
                self.producer.commit_transaction()
                self.log(txn=txn, outcome="committed", error=None)
                return
            except KafkaTimeoutError as error:
                last = error
            except KafkaError as error:
                last = error
                break
        self.log(txn=txn, outcome="unsure", error=repr(last))
        self.new_producer(self.stop)


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--name", "--history"):
        parser.add_argument(name, required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commit-ratio", type=float, default=0.7)
    parser.add_argument("--max-transactions", type=int, default=0)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(args.history, "a") as history:
        writer = HistoryWriter(args, history, stop)
        writer.new_producer(stop)
        txn = 0
        try:
            while writer.producer is not None and (args.max_transactions == 0 or txn < args.max_transactions):
                if stop.is_set():
                    break
                try:
                    writer.run_one(txn)
                except KafkaError as error:  # begin or send refused: never asked to commit
                    writer.log(txn=txn, outcome="aborted", error=repr(error))
                    writer.new_producer(stop)
                txn += 1
        finally:
            if writer.producer is not None:
                writer.producer.close(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
