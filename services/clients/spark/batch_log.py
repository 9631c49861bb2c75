"""The exactly-once sink's batch records, one file per micro-batch under the query's checkpoint
location: `<checkpointLocation>/odradek-sink/<batch id>.json`, UTF-8 JSON

    {"version": 1, "batch_id": 7, "committed": false,
     "transactions": [{"transactional_id": "odradek-sink-1f..-0", "producer_id": 4000,
                       "producer_epoch": 3, "partitions": [["out", 0], ["out", 2]]}]}

A record is written whole or not at all (a temporary file, fsync, rename, fsync of the directory),
so a driver killed while writing leaves the previous state. Only the newest `KEEP_RECORDS` are
kept: batches are committed in order, and only the latest can need rolling forward.

The location is the query's checkpoint location as Spark takes it: a filesystem path or `file:` URI
(on a cluster, a directory every driver that may run the query sees: the same one as Spark's own
checkpoint), or a URI of another Hadoop-compatible filesystem that pyarrow's filesystems reach
(`hdfs://`, `s3://` or Hadoop's `s3a://`, `gs://`, `abfs://`, ...; `pyarrow.fs.FileSystem.from_uri`),
where a record is written to a temporary name and moved over its final name (`FileSystem.move`
replaces it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

from services.clients.admin_types import PreparedTransaction
from services.clients.spark.exactly_once import BatchRecord
from services.common.topic_partition import TopicPartition

FORMAT_VERSION = 1
HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names of filesystems pyarrow names otherwise
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


def pyarrow_uri(location: str) -> str:
    """A Hadoop filesystem URI as pyarrow names its filesystem (`s3a://b/k` is `s3://b/k`)."""
    parsed = urlparse(location)
    return parsed._replace(scheme=HADOOP_SCHEMES.get(parsed.scheme, parsed.scheme)).geturl()


def filesystem_of(location: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem of a non-local checkpoint location, and the path in it."""
    return pafs.FileSystem.from_uri(pyarrow_uri(location))


class RecordStore(Protocol):
    """Whole files in one directory, each replaced atomically."""

    def names(self) -> list[str]: ...
    def read(self, name: str) -> bytes: ...
    def replace(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...


class LocalStore:
    """A local directory: a temporary file, fsync, rename, fsync of the directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def names(self) -> list[str]:
        return [path.name for path in self.directory.iterdir()] if self.directory.is_dir() else []

    def read(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()

    def replace(self, name: str, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".{name}.tmp"
        with open(temporary, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.directory / name)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def delete(self, name: str) -> None:
        (self.directory / name).unlink(missing_ok=True)


class FileSystemStore:
    """A directory of a pyarrow filesystem: a temporary file, moved over the final name."""

    def __init__(self, filesystem: pafs.FileSystem, directory: str) -> None:
        self.filesystem = filesystem
        self.directory = directory.rstrip("/")

    def names(self) -> list[str]:
        selector = pafs.FileSelector(self.directory, allow_not_found=True)
        return [info.base_name for info in self.filesystem.get_file_info(selector)]

    def read(self, name: str) -> bytes:
        with self.filesystem.open_input_stream(f"{self.directory}/{name}") as source:
            return source.read()

    def replace(self, name: str, data: bytes) -> None:
        self.filesystem.create_dir(self.directory, recursive=True)
        temporary = f"{self.directory}/.{name}.tmp"
        with self.filesystem.open_output_stream(temporary) as out:
            out.write(data)
        self.filesystem.move(temporary, f"{self.directory}/{name}")

    def delete(self, name: str) -> None:
        try:
            self.filesystem.delete_file(f"{self.directory}/{name}")
        except FileNotFoundError:
            pass


class BatchLog:
    """The batch records of one query, under its checkpoint location (a path or a URI; with
    `filesystem`, a path in that pyarrow filesystem)."""

    def __init__(self, checkpoint: str | Path, filesystem: pafs.FileSystem | None = None) -> None:
        local = None if filesystem is not None else local_path(str(checkpoint))
        self.store: RecordStore
        if local is not None:
            self.store = LocalStore(local / DIRECTORY)
        else:
            filesystem, path = (filesystem, str(checkpoint)) if filesystem is not None else \
                filesystem_of(str(checkpoint))
            self.store = FileSystemStore(filesystem, f"{path.rstrip('/')}/{DIRECTORY}")
        self.directory = self.store.directory

    def _batch_ids(self) -> list[int]:
        return sorted(int(name[:-5]) for name in self.store.names()
                      if name.endswith(".json") and name[:-5].isdigit())

    def latest(self) -> BatchRecord | None:
        ids = self._batch_ids()
        return decode(self.store.read(f"{ids[-1]}.json")) if ids else None

    def write(self, record: BatchRecord) -> None:
        """Replaces the record of its batch atomically and durably."""
        self.store.replace(f"{record.batch_id}.json", encode(record))
        for old in self._batch_ids()[:-KEEP_RECORDS]:
            self.store.delete(f"{old}.json")
