"""The exactly-once sink's batch records, one file per micro-batch under the query's checkpoint
location: `<checkpointLocation>/odradek-sink/<batch id>.json`, UTF-8 JSON

    {"version": 1, "batch_id": 7, "committed": false,
     "transactions": [{"transactional_id": "odradek-sink-1f..-0", "producer_id": 4000,
                       "producer_epoch": 3, "partitions": [["out", 0], ["out", 2]]}]}

A record is written whole or not at all (a temporary file, fsync, rename, fsync of the directory),
so a driver killed while writing leaves the previous state. Only the newest `KEEP_RECORDS` are
kept: batches are committed in order, and only the latest can need rolling forward. The location
must be a filesystem path (or a `file:` URI) the driver can write, as Spark's own checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from services.clients.admin_types import PreparedTransaction
from services.clients.spark.exactly_once import BatchRecord
from services.common.topic_partition import TopicPartition

FORMAT_VERSION = 1
DIRECTORY = "odradek-sink"
KEEP_RECORDS = 10


def local_path(location: str) -> Path | None:
    """The directory a checkpoint location names, None when it is not on a local filesystem."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else location)
    return None


def encode(record: BatchRecord) -> bytes:
    return json.dumps({
        "version": FORMAT_VERSION, "batch_id": record.batch_id, "committed": record.committed,
        "transactions": [{"transactional_id": txn.transactional_id, "producer_id": txn.producer_id,
                          "producer_epoch": txn.producer_epoch,
                          "partitions": sorted([tp.topic, tp.partition] for tp in txn.topic_partitions)}
                         for txn in record.transactions]}, sort_keys=True).encode()


def decode(data: bytes) -> BatchRecord:
    body = json.loads(data)
    if body.get("version") != FORMAT_VERSION:
        raise ValueError(f"unknown odradek sink batch record version {body.get('version')!r}")
    return BatchRecord(int(body["batch_id"]), tuple(
        PreparedTransaction(txn["transactional_id"], int(txn["producer_id"]), int(txn["producer_epoch"]),
                            frozenset(TopicPartition(topic, int(p)) for topic, p in txn["partitions"]))
        for txn in body["transactions"]), bool(body["committed"]))


class BatchLog:
    """The batch records of one query."""

    def __init__(self, checkpoint_dir: Path) -> None:
        self.directory = checkpoint_dir / DIRECTORY

    def _batch_ids(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        return sorted(int(path.stem) for path in self.directory.glob("*.json") if path.stem.isdigit())

    def latest(self) -> BatchRecord | None:
        ids = self._batch_ids()
        return decode((self.directory / f"{ids[-1]}.json").read_bytes()) if ids else None

    def write(self, record: BatchRecord) -> None:
        """Replaces the record of its batch atomically and durably."""
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"{record.batch_id}.json"
        temporary = self.directory / f".{record.batch_id}.json.tmp"
        with open(temporary, "wb") as out:
            out.write(encode(record))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, final)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        for old in self._batch_ids()[:-KEEP_RECORDS]:
            (self.directory / f"{old}.json").unlink(missing_ok=True)
