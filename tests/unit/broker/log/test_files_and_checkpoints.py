"""File names, checkpoint files, the leader epoch cache, meta.properties, LogConfig."""

from __future__ import annotations

import os

import pytest

from services.broker.log import (
    EpochEntry,
    LeaderEpochCheckpointFile,
    LeaderEpochFileCache,
    LogConfig,
    LogManagerConfig,
    MetaProperties,
    OffsetCheckpointFile,
    check_and_write_meta_properties,
    read_meta_properties,
    write_meta_properties,
)
from services.broker.log.checkpoints import CheckpointError
from services.broker.log.files import (
    atomic_write,
    filename_prefix,
    log_delete_dir_name,
    offset_from_file_name,
    parse_topic_partition_name,
)
from services.broker.log.meta_properties import InconsistentBrokerMetadataError
from services.common.config import ConfigError
from services.common.errors import Errors, StartupRefusedError
from services.common.topic_partition import TopicPartition
from services.common.zk import DuplicateRegistrationError


def test_file_names():
    assert filename_prefix(42) == "00000000000000000042"
    assert offset_from_file_name("00000000000000000042.log.swap") == 42
    assert parse_topic_partition_name("/data/my-topic-12") == ("my-topic", 12)
    deleted = log_delete_dir_name(TopicPartition("a.b-c", 3))
    assert deleted.startswith("a.b-c-3.") and deleted.endswith("-delete")
    assert parse_topic_partition_name(deleted) == ("a.b-c", 3)
    for bad in ("topic", "topic-", "-3", "topic-x", "topic-3.abc-delete-x", "t-1.-delete"):
        with pytest.raises(ValueError):
            parse_topic_partition_name(bad)


def test_atomic_write_leaves_no_temp_file(tmp_path):
    path = os.fspath(tmp_path / "f")
    atomic_write(path, b"one")
    atomic_write(path, b"two")
    assert open(path, "rb").read() == b"two" and os.listdir(tmp_path) == ["f"]


def test_offset_checkpoint_text_format(tmp_path):
    checkpoint = OffsetCheckpointFile(os.fspath(tmp_path / "recovery-point-offset-checkpoint"))
    assert checkpoint.read() == {}
    checkpoint.write({TopicPartition("b", 1): 7, TopicPartition("a", 0): 100})
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\na 0 100\nb 1 7\n"
    assert checkpoint.read() == {("a", 0): 100, ("b", 1): 7}


def test_an_unchanged_checkpoint_is_not_written_again(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(os.fspath(path))
    offsets = {TopicPartition(f"t{i % 4}", i): i for i in range(4000)}
    checkpoint.write(offsets)
    written = path.stat().st_mtime_ns, path.stat().st_ino
    checkpoint.write(dict(offsets))
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == written  # not replaced
    offsets[TopicPartition("t1", 1)] = 2
    checkpoint.write(offsets)
    assert path.stat().st_ino != written[1]
    assert checkpoint.read()[("t1", 1)] == 2
    checkpoint.update_dir(os.fspath(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    checkpoint.write(offsets)  # a new place is written even with the same entries
    assert checkpoint.read() == offsets


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\nx\n", "0\n1\na b 1\n"])
def test_malformed_checkpoints_are_errors(tmp_path, text):
    (tmp_path / "c").write_text(text)
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(os.fspath(tmp_path / "c")).read()


def test_leader_epoch_cache(tmp_path):
    path = os.fspath(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochFileCache(("t", 0), LeaderEpochCheckpointFile(path))
    assert cache.latest_epoch is None and cache.end_offset_for(0, 10) == (-1, -1)
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch, later offset: nothing to do
    cache.assign(3, 10)
    cache.assign(5, 20)
    assert not (tmp_path / "leader-epoch-checkpoint").exists()  # written once flushed past an entry
    assert not cache.flush_entries_below(0)
    assert cache.flush_entries_below(1)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 10\n5 20\n"
    assert not cache.flush_entries_below(30)  # nothing new since
    assert cache.end_offset_for(5, 30) == (5, 30)
    assert cache.end_offset_for(3, 30) == (3, 20)
    assert cache.end_offset_for(4, 30) == (3, 20)
    assert cache.end_offset_for(0, 30) == (0, 0)
    assert cache.end_offset_for(6, 30) == (-1, -1)
    assert cache.epoch_for_offset(15) == 3
    cache.assign(4, 15)  # a lower epoch than the latest replaces the entries after it
    assert cache.epoch_entries == [(1, 0), (3, 10), (4, 15)]
    cache.truncate_from_end(12)
    assert cache.epoch_entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(11)
    assert cache.epoch_entries == [(3, 11)] and cache.latest_epoch == 3
    again = LeaderEpochFileCache(("t", 0), LeaderEpochCheckpointFile(path))
    assert again.epoch_entries == [EpochEntry(3, 11)]
    again.clear_and_flush()
    assert LeaderEpochFileCache(("t", 0), LeaderEpochCheckpointFile(path)).epoch_entries == []


def test_meta_properties(tmp_path):
    a, b = os.fspath(tmp_path / "a"), os.fspath(tmp_path / "b")
    os.makedirs(a)
    os.makedirs(b)
    assert read_meta_properties(a) is None
    write_meta_properties(a, MetaProperties(3, "abc"))
    text = (tmp_path / "a" / "meta.properties").read_text()
    assert "version=0\n" in text and "broker.id=3\n" in text and "cluster.id=abc\n" in text
    assert read_meta_properties(a) == MetaProperties(3, "abc")
    assert check_and_write_meta_properties([a, b], 3) == MetaProperties(3, "abc")
    assert read_meta_properties(b) == MetaProperties(3, "abc")
    with pytest.raises(InconsistentBrokerMetadataError):
        check_and_write_meta_properties([a, b], 4)
    with pytest.raises(InconsistentBrokerMetadataError) as raised:
        check_and_write_meta_properties([a], 3, "other")
    assert raised.value.code == Errors.INCONSISTENT_CLUSTER_ID


def test_meta_properties_refusals_name_the_dir_and_both_ids(tmp_path):
    a, b = os.fspath(tmp_path / "a"), os.fspath(tmp_path / "b")
    os.makedirs(a)
    os.makedirs(b)
    assert check_and_write_meta_properties([a, b], 3, "zk-cluster") == MetaProperties(3, "zk-cluster")
    for log_dir in (a, b):  # a missing file is written, with ZooKeeper's cluster id
        assert read_meta_properties(log_dir) == MetaProperties(3, "zk-cluster")
    with pytest.raises(InconsistentBrokerMetadataError) as raised:
        check_and_write_meta_properties([a, b], 3, "other-cluster")
    message = str(raised.value)
    assert "other-cluster" in message and "zk-cluster" in message
    assert os.path.join(a, "meta.properties") in message
    assert raised.value.code == Errors.INCONSISTENT_CLUSTER_ID
    with pytest.raises(InconsistentBrokerMetadataError) as raised:
        check_and_write_meta_properties([a, b], 7, "zk-cluster")
    message = str(raised.value)
    assert "broker.id 7" in message and "broker.id 3" in message and os.path.join(a, "meta.properties") in message
    # a refusal writes nothing
    assert read_meta_properties(a) == read_meta_properties(b) == MetaProperties(3, "zk-cluster")
    write_meta_properties(b, MetaProperties(3, "third-cluster"))
    with pytest.raises(InconsistentBrokerMetadataError) as raised:
        check_and_write_meta_properties([a, b], 3)
    assert "third-cluster" in str(raised.value) and "zk-cluster" in str(raised.value)


def test_a_refused_start_is_a_startup_refusal():
    assert issubclass(InconsistentBrokerMetadataError, StartupRefusedError)
    assert issubclass(DuplicateRegistrationError, StartupRefusedError)


def test_log_config_names_defaults_and_overrides():
    default = LogConfig()
    assert default.segment_bytes == 1073741824 and default.segment_ms == 604800000
    assert default.segment_index_bytes == 10485760 and default.index_interval_bytes == 4096
    assert default.max_message_bytes == 1048588 and default.retention_ms == 604800000
    assert default.retention_bytes == -1 and default.cleanup_policy == ("delete",)
    assert default.flush_messages == default.flush_ms == 2**63 - 1
    assert default.file_delete_delay_ms == 60000 and default.min_cleanable_dirty_ratio == 0.5
    assert default.delete_retention_ms == 86400000 and default.min_compaction_lag_ms == 0
    assert default.message_timestamp_type == "CreateTime" and not default.preallocate
    base = LogConfig.from_props({"segment.bytes": "1024", "retention.ms": "-1"})
    topic = LogConfig.from_props({"cleanup.policy": "compact,delete"}, defaults=base)
    assert (topic.segment_bytes, topic.retention_ms, topic.compact, topic.delete) == (1024, -1, True, True)
    with pytest.raises(ConfigError):
        LogConfig.from_props({"cleanup.policy": "shred"})
    with pytest.raises(ConfigError):
        LogConfig.from_props({"segment.bytes": "10"})
    manager = LogManagerConfig.from_mapping({"log.dirs": "/a,/b", "broker.id": 1})
    assert manager.log_dirs == ("/a", "/b") and manager.log_retention_check_interval_ms == 300000
