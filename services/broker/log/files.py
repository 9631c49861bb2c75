"""Names of a log's files and directories, and the atomic file replacement every owner of a file uses.

Layout (Kafka's, byte for byte in the names):

    <log.dir>/                                  one configured log directory
        meta.properties                         see `meta_properties`
        recovery-point-offset-checkpoint        see `checkpoints`
        log-start-offset-checkpoint
        replication-offset-checkpoint
        cleaner-offset-checkpoint               where each compacted log's dirty section starts
        .kafka_cleanshutdown                    empty marker: the last shutdown flushed and closed all logs
        .lock                                   held (flock) by the broker that owns the directory
        <topic>-<partition>/                    one partition log
            00000000000000000000.log            segment data, named by its 20-digit base offset
            00000000000000000000.index          sparse offset index, see `offset_index`
            00000000000000000000.timeindex      sparse time index, see `time_index`
            00000000000000000000.txnindex       aborted transactions (only once one aborted), see `txn_index`
            00000000000000000000.snapshot       producer state as of that offset, see `producer_state`
            leader-epoch-checkpoint             see `checkpoints`
        <topic>-<partition>.<32 hex>-delete/    a log renamed for asynchronous deletion

A partition that never held a batch has its directory alone: its first segment's files come with
its first batch (see `segment`), its leader-epoch-checkpoint once a batch follows an epoch (see
`leader_epoch`).

Segment files may carry a second suffix while in transit: `.cleaned` (written by the cleaner, not
yet swapped in), `.swap` (about to replace older segments), `.deleted` (removed from the log,
waiting for `file.delete.delay.ms`).
"""

from __future__ import annotations

import os
import re
import uuid

from services.common.topic_partition import TopicPartition

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TEMP_FILE_SUFFIX = ".tmp"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
META_PROPERTIES_FILE = "meta.properties"

INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
_SPECIAL_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)(-delete|-future)$")


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded decimal offset that names a segment's files."""
    return f"{offset:020d}"


def segment_file(log_dir: str, base_offset: int, suffix: str, extra_suffix: str = "") -> str:
    return os.path.join(log_dir, filename_prefix(base_offset) + suffix + extra_suffix)


def log_file(log_dir: str, base_offset: int, extra_suffix: str = "") -> str:
    return segment_file(log_dir, base_offset, LOG_FILE_SUFFIX, extra_suffix)


def offset_index_file(log_dir: str, base_offset: int, extra_suffix: str = "") -> str:
    return segment_file(log_dir, base_offset, INDEX_FILE_SUFFIX, extra_suffix)


def time_index_file(log_dir: str, base_offset: int, extra_suffix: str = "") -> str:
    return segment_file(log_dir, base_offset, TIME_INDEX_FILE_SUFFIX, extra_suffix)


def producer_snapshot_file(log_dir: str, offset: int) -> str:
    return os.path.join(log_dir, filename_prefix(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def offset_from_file_name(name: str) -> int:
    """The base offset a segment file name starts with (`00000000000000000042.log.swap` -> 42)."""
    return int(os.path.basename(name).split(".", 1)[0])


def parse_topic_partition_name(path: str) -> TopicPartition:
    """The topic-partition a partition directory belongs to, as Kafka's Log.parseTopicPartitionName.

    Accepts `<topic>-<partition>` and `<topic>-<partition>.<id>-delete` / `-future`; anything
    else raises ValueError.
    """
    name = os.path.basename(os.path.normpath(path))
    if not name or "-" not in name:
        raise ValueError(_not_a_log_dir(path))
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
        if not _SPECIAL_DIR.match(name):
            raise ValueError(_not_a_log_dir(path))
        name = name[: name.rindex(".")]
    topic, _, partition = name.rpartition("-")
    if not topic or not partition or not partition.lstrip("-").isdigit():
        raise ValueError(_not_a_log_dir(path))
    return TopicPartition(topic, int(partition))


def _not_a_log_dir(path: str) -> str:
    return (f"found directory {path!r}, which is not of the form topic-partition or "
            "topic-partition.uniqueId-delete (if marked for deletion)")


def log_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def log_delete_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def is_delete_dir(path: str) -> bool:
    return os.path.basename(os.path.normpath(path)).endswith(DELETE_DIR_SUFFIX)


def fsync_dir(path: str) -> None:
    """Makes renames and creations inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes) -> None:
    """Replaces `path` with `data` crash-safely: write `<path>.tmp`, fsync, rename, fsync the dir."""
    tmp = path + TEMP_FILE_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def unlink_if_exists(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def rename_file(source: str, target: str) -> None:
    """Renames `source` to `target`; a source already gone is fine when the target exists (an
    earlier rename of the same file got there first)."""
    try:
        os.rename(source, target)
    except FileNotFoundError:
        if not os.path.exists(target):
            raise
