"""The broker's storage engine: partition logs as Kafka lays them out on disk, as a pure library.

It knows files, paths, config dataclasses and an injected clock; it never touches the network.

    files             file and directory names; atomic file replacement
    config            LogConfig (topic keys), LogManagerConfig (broker keys)
    errors            storage errors with Kafka's codes
    info              LogOffsetMetadata, FetchDataInfo, TimestampAndOffset, LogAppendInfo
    segment_file      SegmentFile: opening, length, fsync, rename and unlink of a segment's files
    index             MmapIndex: memory-mapped fixed-size entries
    offset_index      OffsetIndex: the .index file
    time_index        TimeIndex: the .timeindex file
    file_records      FileRecords: the .log file
    segment           LogSegment: a .log file and its two indexes
    validation        checks of appended batches
    assignment        offsets stamped into a leader append's headers
    retention         which segments retention deletes
    loader            opening a partition dir: leftovers, swaps, recovery
    log               Log: one partition
    log_maintenance   retention and segment replacement of a Log (a mixin)
    leader_epoch      LeaderEpochFileCache
    producer_state    ProducerStateManager: producers' last batches, dedupe, producer snapshots
    checkpoints       the checkpoint files
    meta_properties   meta.properties
    offset_map        OffsetMap: the cleaner's key -> latest offset map, in bounded memory
    cleaner_txn       what compaction must know about transactions and producers
    cleaner_manager   LogCleanerManager: which log to clean, cleaning states, cleaner checkpoint
    compactor         Cleaner: one compaction of one log
    cleaner           LogCleaner: compaction threads and the manager's handle on them
    manager           LogManager: all logs of a broker
"""

from services.broker.log.checkpoints import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from services.broker.log.cleaner import CleanerConfig, LogCleaner
from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from services.broker.log.info import (
    FetchDataInfo,
    LogAppendInfo,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from services.broker.log.leader_epoch import LeaderEpochFileCache
from services.broker.log.log import Log
from services.broker.log.manager import LogManager
from services.broker.log.meta_properties import (
    MetaProperties,
    check_and_write_meta_properties,
    read_meta_properties,
    write_meta_properties,
)
from services.broker.log.offset_index import OffsetIndex
from services.broker.log.segment import LogSegment
from services.broker.log.time_index import TimeIndex
from services.broker.log.validation import AppendOrigin
from services.common.shared_types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

__all__ = [
    "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "AppendOrigin", "CleanerConfig", "CorruptRecordError", "EpochEntry",
    "FetchDataInfo", "InvalidRecordError", "InvalidTimestampError", "KafkaStorageError",
    "LeaderEpochCheckpointFile", "LeaderEpochFileCache", "Log", "LogAppendInfo", "LogCleaner", "LogConfig",
    "LogManager", "LogManagerConfig", "LogOffsetMetadata", "LogSegment", "MetaProperties",
    "OffsetCheckpointFile", "OffsetIndex", "OffsetOutOfRangeError", "OffsetsOutOfOrderError",
    "RecordBatchTooLargeError", "RecordTooLargeError", "TimeIndex", "TimestampAndOffset",
    "UnexpectedAppendOffsetError", "check_and_write_meta_properties",
    "read_meta_properties", "write_meta_properties",
]
