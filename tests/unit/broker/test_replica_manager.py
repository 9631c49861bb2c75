"""ReplicaManager over real logs in a temp dir: leadership, produce, fetch, offsets, errors."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import pytest

from services.broker.log.config import LogConfig, LogManagerConfig
from services.broker.log.errors import KafkaStorageError
from services.broker.log.manager import LogManager
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_fetch import FetchParams, FetchPartition
from services.broker.replica_manager import ReplicaManager
from services.broker.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from services.broker.servicer import BrokerServicer
from services.clients.partition_requests import parse_produce
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors, KafkaError
from services.common.records import build_batch, iter_records
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition


@pytest.fixture
def manager(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    configs = {"strict": {"min.insync.replicas": "2"}, "compacted": {"cleanup.policy": "compact"}}
    rm = ReplicaManager(1, logs, MetadataCache(), topic_config=lambda t: configs.get(t, {}))
    yield rm
    rm.shutdown()
    logs.shutdown()


def lead(rm, topic="t", partition=0, epoch=0, isr=(1,), replicas=(1,), controller_epoch=1):
    state = PartitionStateInfo(TopicPartition(topic, partition), controller_epoch, 1, epoch, isr, 0, replicas,
                               is_new=True)
    return rm.become_leader_or_follower(1001, controller_epoch, [state])


def produce(rm, entries, acks=1, timeout_ms=1000):
    done = threading.Event()
    box = {}

    def respond(results):
        box.update(results)
        done.set()

    rm.append_records(acks, timeout_ms, entries, respond)
    assert done.wait(10)
    return box


def fetch(rm, offset, max_wait_ms=0, min_bytes=1, topic="t", epoch=-1):
    done = threading.Event()
    box = {}
    params = FetchParams(-1, max_wait_ms, min_bytes, 1 << 20,
                         (FetchPartition(topic, 0, offset, 1 << 20, epoch),))

    def respond(results):
        box.update(results)
        done.set()

    rm.fetch_messages(params, respond)
    return done, box


def test_leader_produce_fetch_and_offsets(manager):
    assert lead(manager) == {("t", 0): 0}
    result = produce(manager, {("t", 0): build_batch([b"a", b"b"], timestamps=1000)})[("t", 0)]
    assert (result.error_code, result.base_offset) == (0, 0)
    result = produce(manager, {("t", 0): build_batch([b"c"], timestamps=2000)}, acks=-1)[("t", 0)]
    assert (result.error_code, result.base_offset) == (0, 2)
    done, box = fetch(manager, 0)
    assert done.wait(5)
    assert [r.value for r in iter_records(box[("t", 0)].records)] == [b"a", b"b", b"c"]
    assert box[("t", 0)].high_watermark == 3
    assert manager.list_offset("t", 0, -2).offset == 0
    assert manager.list_offset("t", 0, -1).offset == 3
    assert manager.list_offset("t", 0, 1500).offset == 2
    assert manager.list_offset("t", 0, 9999).offset == -1


def test_a_refused_record_is_named_in_the_produce_response(manager):
    lead(manager, topic="compacted")
    batch = build_batch([b"a", b"b"], keys=[b"k", None], timestamps=1000)
    result = produce(manager, {("compacted", 0): batch})[("compacted", 0)]
    assert (result.error_code, result.base_offset) == (Errors.INVALID_RECORD, -1)
    assert result.record_errors == ((1, "Compacted topic cannot accept message without key"),)
    response = BrokerServicer._produce_response([("compacted", 0)], {("compacted", 0): result}, Errors.NONE, "")
    [(code, parsed)] = parse_produce(response).values()
    assert code == Errors.INVALID_RECORD
    assert parsed.record_errors == result.record_errors
    assert "Compacted topic cannot accept message without key" in parsed.error_message


def test_long_poll_completes_when_data_arrives(manager):
    lead(manager)
    done, box = fetch(manager, 0, max_wait_ms=30_000)
    assert not done.is_set()
    produce(manager, {("t", 0): build_batch([b"late"])})
    assert done.wait(5)
    assert [r.value for r in iter_records(box[("t", 0)].records)] == [b"late"]


def test_long_poll_expires_empty(manager):
    lead(manager)
    done, box = fetch(manager, 0, max_wait_ms=50)
    assert done.wait(5)
    assert box[("t", 0)].error_code == 0 and box[("t", 0)].records == b""


def test_errors_carry_kafka_codes(manager):
    lead(manager)
    batch = build_batch([b"x"])
    bad_acks = produce(manager, {("t", 0): batch}, acks=2)[("t", 0)]
    assert bad_acks.error_code == Errors.INVALID_REQUIRED_ACKS
    unknown = produce(manager, {("nope", 0): batch})[("nope", 0)]
    assert unknown.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    internal = produce(manager, {("__consumer_offsets", 0): batch})
    assert internal[("__consumer_offsets", 0)].error_code == Errors.INVALID_TOPIC_EXCEPTION
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF
    assert produce(manager, {("t", 0): bytes(damaged)})[("t", 0)].error_code == Errors.CORRUPT_MESSAGE
    assert produce(manager, {("t", 0): b"\x00" * 10})[("t", 0)].error_code == Errors.CORRUPT_MESSAGE
    big = build_batch([b"z" * 2_000_000])
    assert produce(manager, {("t", 0): big})[("t", 0)].error_code == Errors.MESSAGE_TOO_LARGE
    done, box = fetch(manager, 5)
    assert done.wait(5) and box[("t", 0)].error_code == Errors.OFFSET_OUT_OF_RANGE
    done, box = fetch(manager, 0, epoch=7)
    assert done.wait(5) and box[("t", 0)].error_code == Errors.UNKNOWN_LEADER_EPOCH
    # nothing bad reached the log
    assert manager.partition("t", 0).log.log_end_offset == 0


def test_min_insync_replicas(manager):
    lead(manager, topic="strict")
    result = produce(manager, {("strict", 0): build_batch([b"x"])}, acks=-1)[("strict", 0)]
    assert result.error_code == Errors.NOT_ENOUGH_REPLICAS
    assert manager.partition("strict", 0).log.log_end_offset == 0
    assert produce(manager, {("strict", 0): build_batch([b"x"])}, acks=1)[("strict", 0)].error_code == 0


def test_not_leader_when_follower_and_fencing(manager):
    state = PartitionStateInfo(TopicPartition("t", 0), 1, 2, 0, (2, 1), 0, (2, 1), is_new=True)
    manager.metadata_cache.update(controller_id=1001, controller_epoch=1, live_brokers=[],
                                  partition_states=[replace(state, controller_epoch=0, is_new=False)])
    assert manager.become_leader_or_follower(1001, 1, [state]) == {("t", 0): 0}
    result = produce(manager, {("t", 0): build_batch([b"x"])})[("t", 0)]
    assert result.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    # the same leader epoch again is stale; an older controller epoch is refused whole
    again = PartitionStateInfo(TopicPartition("t", 0), 1, 1, 0, (1,), 0, (2, 1), is_new=False)
    stale = manager.become_leader_or_follower(1001, 1, [again])
    assert stale == {("t", 0): Errors.STALE_CONTROLLER_EPOCH}
    with pytest.raises(KafkaError) as caught:
        manager.become_leader_or_follower(1001, 0, [again])
    assert caught.value.code == Errors.STALE_CONTROLLER_EPOCH
    # not a replica at all
    other = PartitionStateInfo(TopicPartition("u", 0), 1, 3, 0, (3,), 0, (3,), is_new=True)
    not_replica = manager.become_leader_or_follower(1001, 1, [other])
    assert not_replica == {("u", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}


def test_stop_replica_with_delete_removes_the_log(manager, tmp_path):
    lead(manager)
    produce(manager, {("t", 0): build_batch([b"x"])})
    assert (tmp_path / "logs" / "t-0").exists()
    assert manager.stop_replicas(1001, 1, [("t", 0, True)]) == {("t", 0): 0}
    assert manager.partition("t", 0) is None
    assert not (tmp_path / "logs" / "t-0").exists()


def test_stop_replica_deletes_all_its_logs_in_one_call_and_reports_each_failure(manager, tmp_path, monkeypatch):
    states = [PartitionStateInfo(TopicPartition("big", p), 1, 1, 0, (1,), 0, (1,), is_new=True) for p in range(30)]
    manager.become_leader_or_follower(1001, 1, states)
    calls = []
    delete_logs = manager.log_manager.async_delete_logs

    def recorded(tps):
        tps = list(tps)
        calls.append(tps)
        deleted, failed = delete_logs([tp for tp in tps if tp != ("big", 7)])
        failed[("big", 7)] = KafkaStorageError("read-only file system")
        return deleted, failed

    monkeypatch.setattr(manager.log_manager, "async_delete_logs", recorded)
    errors = manager.stop_replicas(1001, 1, [("big", p, True) for p in range(30)] + [("big", 40, False)])
    assert len(calls) == 1 and sorted(calls[0]) == [("big", p) for p in range(30)]
    assert errors == {**{("big", p): 0 for p in range(30) if p != 7}, ("big", 7): Errors.KAFKA_STORAGE_ERROR,
                      ("big", 40): 0}
    assert all(manager.partition("big", p) is None for p in range(30))
    assert [name for name in os.listdir(tmp_path / "logs") if name.startswith("big-") and "-delete" not in name] == [
        "big-7"]


def test_a_new_leader_epoch_is_known_before_its_first_append(manager):
    """Kafka's makeLeader assigns the epoch's start offset: OffsetForLeaderEpoch answers for an
    empty log, and for each later epoch from where it took over."""
    lead(manager, epoch=0)
    assert manager.offset_for_leader_epoch("t", 0, -1, 0) == (0, 0, 0)
    produce(manager, {("t", 0): build_batch([b"a", b"b"])})
    lead(manager, epoch=3)
    assert manager.offset_for_leader_epoch("t", 0, -1, 0) == (0, 0, 2)
    assert manager.offset_for_leader_epoch("t", 0, -1, 3) == (0, 3, 2)


def test_leader_and_isr_of_new_partitions_writes_a_directory_each_and_nothing_in_it(manager, tmp_path):
    """Each new log is one mkdir: its segment files wait for its first batch, and a new leader
    epoch for the flush past its start (an epoch starting at the log end is dropped at load)."""
    states = [PartitionStateInfo(TopicPartition("many", i), 1, 1 + i % 2, 0, (1, 2), 0, (1 + i % 2, 2 - i % 2),
                                 is_new=True) for i in range(20)]
    assert set(manager.become_leader_or_follower(1001, 1, states).values()) == {0}
    dirs = sorted(os.listdir(tmp_path / "logs" / f"many-{i}") for i in range(20))
    assert dirs == [[]] * 20
    assert manager.offset_for_leader_epoch("many", 0, -1, 0) == (0, 0, 0)
    produce(manager, {("many", 0): build_batch([b"a"])})
    assert {"00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"} <= set(
        os.listdir(tmp_path / "logs" / "many-0"))  # and the epoch's checkpoint, written in the background


def test_only_followers_on_live_brokers_join_the_isr(manager):
    lead(manager, isr=(1,), replicas=(1, 2))
    produce(manager, {("t", 0): build_batch([b"a"])})
    params = FetchParams(2, 0, 1, 1 << 20, (FetchPartition("t", 0, 1, 1 << 20, 0),))
    manager.fetch_messages(params, lambda results: None)  # follower 2 has caught up
    partition = manager.partition("t", 0)
    assert partition.isr_to_expand(frozenset({1})) is None  # broker 2 is not known alive
    assert partition.isr_to_expand(frozenset({1, 2})) == (1, 2)
    assert partition.isr_to_expand() == (1, 2)


def test_a_shut_down_fetcher_manager_starts_no_fetcher():
    started = []
    fetchers = ReplicaFetcherManager(None, FetcherConfig(replica_id=1), started.append, SYSTEM_CLOCK)
    fetchers.shutdown()
    fetchers.add_fetchers({("t", 0): (2, 0)})
    assert started == [] and fetchers.fetch_state(("t", 0)) is None


def test_one_leader_and_isr_reads_each_topic_config_once(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    reads = []

    def topic_config(topic):
        reads.append(topic)
        return {"min.insync.replicas": "2"} if topic == "strict" else {}

    rm = ReplicaManager(1, logs, MetadataCache(), topic_config=topic_config)
    states = [PartitionStateInfo(TopicPartition(topic, index), 1, 1, 0, (1,), 0, (1,), is_new=True)
              for topic in ("strict", "loose") for index in range(50)]
    assert set(rm.become_leader_or_follower(1001, 1, states).values()) == {0}
    assert sorted(reads) == ["loose", "strict"]
    assert {rm.partition("strict", i).log.config.min_insync_replicas for i in range(50)} == {2}
    assert {rm.partition("loose", i).log.config.min_insync_replicas for i in range(50)} == {1}
    rm.shutdown()
    logs.shutdown()


def test_a_topic_whose_config_cannot_be_read_gets_no_log_with_the_defaults(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    readable = False

    def topic_config(topic):
        if topic == "compacted" and not readable:
            raise ValueError("malformed config znode")
        return {"cleanup.policy": "compact"} if topic == "compacted" else {}

    rm = ReplicaManager(1, logs, MetadataCache(), topic_config=topic_config)
    states = [PartitionStateInfo(TopicPartition(topic, 0), 1, 1, 0, (1,), 0, (1,), is_new=True)
              for topic in ("compacted", "plain")]
    assert rm.become_leader_or_follower(1001, 1, states) == {("compacted", 0): Errors.INVALID_CONFIG, ("plain", 0): 0}
    assert logs.get_log(TopicPartition("compacted", 0)) is None
    readable = True  # the config fixed, the next LeaderAndIsr makes the log
    assert rm.become_leader_or_follower(1001, 1, states) == {("compacted", 0): 0, ("plain", 0): 0}
    assert rm.partition("compacted", 0).log.config.compact
    rm.shutdown()
    logs.shutdown()


def test_delete_records_moves_the_log_start_offset_of_leaders_and_followers(manager):
    lead(manager)
    lead(manager, topic="compacted")
    produce(manager, {("t", 0): build_batch([b"a", b"b", b"c"])})
    assert manager.delete_records("t", 0, 2) == (Errors.NONE, 2)
    assert manager.list_offset("t", 0, -2).offset == 2
    assert manager.delete_records("t", 0, 1) == (Errors.NONE, 2)  # never backwards
    assert manager.delete_records("t", 0, 4) == (Errors.OFFSET_OUT_OF_RANGE, -1)  # beyond the high watermark
    assert manager.delete_records("t", 0, -1) == (Errors.NONE, 3)  # up to the high watermark
    assert manager.delete_records("compacted", 0, 0) == (Errors.POLICY_VIOLATION, -1)
    assert manager.delete_records("missing", 0, 0) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1)

    follower = PartitionStateInfo(TopicPartition("f", 0), 1, 2, 0, (2, 1), 0, (2, 1), is_new=True)
    assert manager.become_leader_or_follower(1001, 1, [follower]) == {("f", 0): 0}
    assert manager.delete_records("f", 0, 0)[0] == Errors.NOT_LEADER_OR_FOLLOWER
    tp = TopicPartition("f", 0)
    assert manager.append_as_follower(tp, build_batch([b"a", b"b", b"c"]), 3, leader_log_start_offset=2) == 3
    assert manager.log_manager.get_log(tp).log_start_offset == 2
    # the leader's start is taken no further than the local high watermark
    assert manager.append_as_follower(tp, build_batch([b"d"], base_offset=3), 3, leader_log_start_offset=4) == 4
    assert manager.log_manager.get_log(tp).log_start_offset == 3


def test_a_leader_holds_back_throttled_replicas_outside_the_isr_over_its_rate(tmp_path):
    logs = LogManager(LogManagerConfig(log_dirs=(str(tmp_path / "logs"),)), LogConfig())
    logs.startup()
    configs = {"moving": {"leader.replication.throttled.replicas": "0:1"}}
    rm = ReplicaManager(1, logs, MetadataCache(), topic_config=lambda t: configs.get(t, {}))
    rm.leader_quota.update_rate(1000)
    for topic in ("moving", "still"):
        lead(rm, topic=topic, isr=(1, 3), replicas=(1, 2, 3))
        produce(rm, {(topic, 0): build_batch([b"x" * 5000])})
    answers = {}

    def follower_fetch(replica_id):
        params = FetchParams(replica_id, 0, 1, 1 << 20, (FetchPartition("moving", 0, 0, 1 << 20, 0),
                                                         FetchPartition("still", 0, 0, 1 << 20, 0)))
        rm.fetch_messages(params, answers.update)
        return {key[0]: len(result.records) for key, result in answers.items()}

    first = follower_fetch(2)
    assert first["moving"] > 5000 and first["still"] > 5000  # under the rate: one burst goes out
    assert rm.leader_quota.throttled_bytes_total == first["moving"]
    second = follower_fetch(2)
    assert second["moving"] == 0 and second["still"] > 5000  # over it: only the throttled one waits
    assert follower_fetch(3)["moving"] > 5000  # an ISR member is never throttled
    configs.pop("moving")
    rm.update_replication_throttles("moving", {})
    assert follower_fetch(2)["moving"] > 5000
    rm.shutdown()
    logs.shutdown()
