"""ReplicaManager transactions over real logs: WriteTxnMarkers (acks=all, fencing, errors),
read_committed fetch and ListOffsets, DescribeProducers, coordinator produces."""

from __future__ import annotations

import threading
import time

from services.broker.log.txn_index import AbortedTxn
from services.broker.log.validation import AppendOrigin
from services.broker.replica_fetch import FetchParams, FetchPartition
from services.common.errors import Errors
from services.common.records import build_batch, iter_batches
from services.common.shared_types import PartitionStateInfo, TxnMarker
from services.common.topic_partition import TopicPartition

from .test_replica_manager import lead, produce

TP = TopicPartition("t", 0)
NOW_MS = int(time.time() * 1000)  # markers carry the broker's time: data near it stays in one segment
PID = 42


def txn_batch(seq: int, count: int = 1, *, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch([b"v%d" % (seq + i) for i in range(count)], timestamps=NOW_MS, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def write_markers(rm, markers, timeout_ms=5000):
    done = threading.Event()
    box = []

    def respond(codes):
        box.extend(codes)
        done.set()

    rm.write_txn_markers(markers, timeout_ms, respond)
    return done, box


def marker(commit: bool, *partitions, epoch: int = 0, coordinator_epoch: int = 0, pid: int = PID) -> TxnMarker:
    return TxnMarker(pid, epoch, commit, coordinator_epoch), tuple(partitions or (TP,))


def fetch_now(rm, offset: int, *, read_committed: bool, replica_id: int = -1):
    box = {}
    params = FetchParams(replica_id, 0, 1, 1 << 20, (FetchPartition("t", 0, offset, 1 << 20),), read_committed)
    rm.fetch_messages(params, box.update)
    return box[("t", 0)]


def batch_offsets(records) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h, _ in iter_batches(records)]


def test_markers_are_answered_once_replicated(manager):
    lead(manager, isr=(1, 2), replicas=(1, 2))
    assert produce(manager, {TP: txn_batch(0)})[TP].error_code == 0
    done, codes = write_markers(manager, [marker(True)])
    assert not done.wait(0.2)  # acks=all: the follower has not fetched the marker yet
    fetch_now(manager, 2, read_committed=False, replica_id=2)  # the follower is at the log end
    assert done.wait(5)
    assert codes == [{TP: Errors.NONE}]


def test_markers_time_out_without_replication(manager):
    lead(manager, isr=(1, 2), replicas=(1, 2))
    done, codes = write_markers(manager, [marker(False)], timeout_ms=50)
    assert done.wait(5)
    assert codes == [{TP: Errors.REQUEST_TIMED_OUT}]


def test_marker_errors_carry_kafka_codes(manager):
    lead(manager)
    manager.become_leader_or_follower(1001, 1, [  # a follower of broker 2
        PartitionStateInfo(TopicPartition("f", 0), 1, 2, 1, (1, 2), 0, (1, 2), is_new=True)])
    produce(manager, {TP: txn_batch(0, epoch=3)})
    done, codes = write_markers(manager, [marker(True, epoch=3, coordinator_epoch=5)])
    assert done.wait(5) and codes == [{TP: Errors.NONE}]
    done, codes = write_markers(manager, [
        marker(True, epoch=3, coordinator_epoch=4),  # an older coordinator
        marker(False, epoch=2, coordinator_epoch=9),  # an older producer epoch
        marker(True, TopicPartition("f", 0), TopicPartition("nope", 0), epoch=3, coordinator_epoch=5),
    ])
    assert done.wait(5)
    assert codes == [
        {TP: Errors.TRANSACTION_COORDINATOR_FENCED},
        {TP: Errors.INVALID_PRODUCER_EPOCH},
        {("f", 0): Errors.NOT_LEADER_OR_FOLLOWER, ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION},
    ]
    assert (Errors.TRANSACTION_COORDINATOR_FENCED, Errors.INVALID_PRODUCER_EPOCH) == (52, 47)


def test_markers_go_to_internal_topics(manager):
    offsets = TopicPartition("__consumer_offsets", 3)
    lead(manager, topic="__consumer_offsets", partition=3)
    done, box = threading.Event(), {}
    manager.append_records(-1, 1000, {offsets: txn_batch(-1)}, lambda r: (box.update(r), done.set()),
                           internal_topics_allowed=True, origin=AppendOrigin.COORDINATOR)
    assert done.wait(5) and box[offsets].error_code == 0
    done, codes = write_markers(manager, [marker(True, offsets)])
    assert done.wait(5) and codes == [{offsets: Errors.NONE}]
    assert manager.partition(*offsets).log.first_unstable_offset is None


def test_read_committed_fetches_stop_at_the_last_stable_offset(manager):
    lead(manager)
    produce(manager, {TP: build_batch([b"plain"], timestamps=NOW_MS)})  # 0
    produce(manager, {TP: txn_batch(0, 2)})  # 1-2, open
    produce(manager, {TP: build_batch([b"after"], timestamps=NOW_MS)})  # 3
    committed = fetch_now(manager, 0, read_committed=True)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
    assert batch_offsets(committed.records) == [(0, 0)]
    assert fetch_now(manager, 1, read_committed=True).records == b""
    uncommitted = fetch_now(manager, 0, read_committed=False)
    assert uncommitted.last_stable_offset == 1 and len(batch_offsets(uncommitted.records)) == 3
    assert manager.list_offset("t", 0, -1, read_committed=True).offset == 1
    assert manager.list_offset("t", 0, -1).offset == 4

    done, codes = write_markers(manager, [marker(False)])  # 4: abort
    assert done.wait(5) and codes == [{TP: Errors.NONE}]
    result = fetch_now(manager, 1, read_committed=True)
    assert result.last_stable_offset == 5
    assert batch_offsets(result.records) == [(1, 2), (3, 3), (4, 4)]
    assert result.aborted_transactions == (AbortedTxn(PID, 1, 4, 5),)
    assert fetch_now(manager, 1, read_committed=False).aborted_transactions == ()
    assert manager.list_offset("t", 0, -1, read_committed=True).offset == 5


def test_a_long_poll_in_read_committed_waits_for_the_stable_offset(manager):
    lead(manager)
    produce(manager, {TP: txn_batch(0)})  # 0, open
    done, box = threading.Event(), {}
    params = FetchParams(-1, 10_000, 1, 1 << 20, (FetchPartition("t", 0, 0, 1 << 20),), True)
    manager.fetch_messages(params, lambda r: (box.update(r), done.set()))
    produce(manager, {TP: build_batch([b"x"], timestamps=NOW_MS)})  # the high watermark moves, not the LSO
    ahead_done, ahead = threading.Event(), {}  # a position past the stable offset waits too
    params = FetchParams(-1, 10_000, 1, 1 << 20, (FetchPartition("t", 0, 1, 1 << 20),), True)
    manager.fetch_messages(params, lambda r: (ahead.update(r), ahead_done.set()))
    assert not done.wait(0.2) and not ahead_done.is_set()
    write_markers(manager, [marker(True)])
    assert done.wait(5) and ahead_done.wait(5)
    assert batch_offsets(box[("t", 0)].records) == [(0, 0), (1, 1), (2, 2)]
    assert batch_offsets(ahead[("t", 0)].records) == [(1, 1), (2, 2)]


def test_describe_producers(manager):
    lead(manager)
    produce(manager, {TP: txn_batch(0, 3, epoch=1)})
    produce(manager, {TP: build_batch([b"i"], timestamps=NOW_MS + 1, producer_id=7, producer_epoch=0, base_sequence=0)})
    code, producers = manager.describe_producers("t", 0)
    assert code == 0
    by_id = {p.producer_id: p for p in producers}
    assert by_id[PID][:3] == (PID, 1, 2) and by_id[PID].current_transaction_start_offset == 0
    assert by_id[7].current_transaction_start_offset == -1 and by_id[7].last_timestamp == NOW_MS + 1
    assert manager.describe_producers("nope", 0)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_a_follower_describes_its_producers_too(manager):
    follower = PartitionStateInfo(TopicPartition("f", 0), 1, 2, 0, (2, 1), 0, (2, 1), is_new=True)
    assert manager.become_leader_or_follower(1001, 1, [follower]) == {("f", 0): 0}
    assert manager.describe_producers("f", 0) == (Errors.NONE, [])
