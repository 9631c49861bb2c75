"""The fault checker on crafted histories: each verdict fires on a bad history and stays quiet on a
good one."""

from __future__ import annotations

import json

from services.devcluster.faults.checker import VERDICTS, LeadershipEvent, ReadRecord, Result, check, read_leadership
from services.devcluster.faults.history import FAIL, INFO, INVOKE, OK, History, Op, make_value

WALL = 1_000_000.0  # the wall-clock time of monotonic 0 in these histories


def value(producer: str, sequence: int) -> bytes:
    return make_value(producer, sequence)


class Builder:
    """A history written op by op, one second apart, with the full reads it is checked against."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(self, process: str, type: str, f: str, value=None, partition=None, offset=None) -> None:
        self.ops.append(Op(process, type, f, value, partition, offset, float(len(self.ops))))

    def send(self, producer: str, sequence: int, partition: int, offset: int, outcome: str = OK) -> None:
        self.op(producer, INVOKE, "send", value(producer, sequence), partition)
        self.op(producer, outcome, "send", value(producer, sequence), partition, offset if outcome == OK else None)

    def poll(self, consumer: str, *records: tuple[int, int, bytes]) -> None:
        self.op(consumer, INVOKE, "poll")
        self.op(consumer, OK, "poll", list(records))

    def history(self) -> History:
        return History(self.ops, wall_offset_s=WALL)


def good_run() -> tuple[Builder, dict[int, list[ReadRecord]]]:
    """Two producers on two partitions, a consumer reading along; a fault in the middle."""
    run = Builder()
    run.send("p1", 0, 0, 0)
    run.send("p2", 0, 1, 0)
    run.op("nemesis", INFO, "kill", "broker-1")
    run.send("p1", 1, 0, 1)
    run.send("p1", 2, 1, 1)
    run.send("p2", 1, 0, 2, outcome=INFO)  # unknown outcome: it landed
    run.send("p2", 2, 0, None, outcome=FAIL)
    run.poll("c1", (0, 0, value("p1", 0)), (0, 1, value("p1", 1)))
    run.poll("c1", (0, 2, value("p2", 1)), (1, 0, value("p2", 0)))
    full = {0: [ReadRecord(0, value("p1", 0), 0), ReadRecord(1, value("p1", 1), 1), ReadRecord(2, value("p2", 1), 1)],
            1: [ReadRecord(0, value("p2", 0), 0), ReadRecord(1, value("p1", 2), 0)]}
    return run, full


def counts(result: Result) -> dict[str, int]:
    return {verdict: n for verdict, n in result.counts.items() if n}


def test_a_good_history_has_no_verdict_and_counts_faults_and_acknowledged_writes():
    run, full = good_run()
    result = check(run.history(), full)
    assert counts(result) == {}
    assert (result.faults, result.acknowledged, result.violations) == (1, 4, 0)


def test_a_service_found_dead_is_counted_apart_from_the_faults():
    run, full = good_run()
    run.op("nemesis", INFO, "crashed", "broker-2")
    result = check(run.history(), full)
    assert (result.faults, result.crashed, result.violations) == (1, ["broker-2"], 0)
    assert "found dead: ['broker-2']" in result.describe()


def test_an_acknowledged_write_missing_from_the_full_read_is_lost():
    run, full = good_run()
    del full[1][1]
    result = check(run.history(), full)
    assert counts(result) == {"lost": 1}
    assert result.examples["lost"] == [(value("p1", 2), 1, 1, [])]


def test_an_acknowledged_write_at_another_offset_than_acknowledged_is_lost_there():
    run, full = good_run()
    full[1][1] = ReadRecord(7, value("p1", 2), 0)
    result = check(run.history(), full)
    assert counts(result) == {"lost": 1}
    assert result.examples["lost"] == [(value("p1", 2), 1, 1, [(1, 7)])]


def test_a_write_acknowledged_without_an_offset_is_held_anywhere_in_its_partition():
    # seed 3200 of `bench/faults.py --hosts --seconds 15` (drop:broker-2:broker-1 for 5.6 s):
    # librdkafka acknowledged two retried batches with no offset; both were in the log
    run, full = good_run()
    run.send("k1", 0, 1, None)
    full[1].append(ReadRecord(2, value("k1", 0), 0))
    assert counts(check(run.history(), full)) == {}
    run.send("k1", 1, 0, None)
    full[1].append(ReadRecord(3, value("k1", 1), 0))  # in another partition than acknowledged
    result = check(run.history(), full)
    assert counts(result) == {"lost": 1}
    assert result.examples["lost"] == [(value("k1", 1), 0, None, [(1, 3)])]


def test_a_value_read_twice_is_duplicated():
    run, full = good_run()
    full[1].append(ReadRecord(2, value("p1", 2), 1))
    assert counts(check(run.history(), full)) == {"duplicated": 1}


def test_one_producers_values_out_of_sequence_in_a_partition_are_reordered():
    run, full = good_run()
    full[0] = [ReadRecord(0, value("p1", 1), 0), ReadRecord(1, value("p1", 0), 1), ReadRecord(2, value("p2", 1), 1)]
    result = check(run.history(), full)
    assert counts(result)["reordered"] == 1
    # the consumer was handed p1:0 at offset 0 and p1:1 at offset 1, which the log no longer holds there
    assert counts(result)["read_then_absent"] == 2


def test_a_consumer_handed_an_offset_again_without_a_rebalance_went_back():
    run, full = good_run()
    run.poll("c1", (0, 1, value("p1", 1)))
    assert counts(check(run.history(), full)) == {"offsets_back": 1}


def test_after_a_rebalance_a_consumer_may_read_an_offset_again():
    run, full = good_run()
    run.op("c1", INFO, "revoked", [0, 1])
    run.op("c1", INFO, "assigned", [0, 1])
    run.poll("c1", (0, 1, value("p1", 1)))
    assert counts(check(run.history(), full)) == {}


def test_a_record_read_that_the_full_read_lacks_was_read_then_absent():
    run, full = good_run()
    run.poll("c2", (0, 3, b"p3:0"))
    assert counts(check(run.history(), full)) == {"read_then_absent": 1}


def transactional_run(outcome: str, records: list[bytes]) -> tuple[Builder, dict, dict]:
    run, full = good_run()
    run.op("txn", INVOKE, "txn", records)
    run.op("txn", outcome, "txn", records)
    full[0] = full[0] + [ReadRecord(3 + i, v, 1) for i, v in enumerate(records)]
    return run, full, {p: list(r) for p, r in full.items()}


def test_a_committed_transaction_read_whole_is_fine_and_an_aborted_one_unseen_is_fine():
    committed = [b"t1", b"t2"]
    run, full, committed_read = transactional_run(OK, committed)
    assert counts(check(run.history(), full, committed_read)) == {}
    run, full, committed_read = transactional_run(FAIL, [b"a1", b"a2"])
    committed_read[0] = committed_read[0][:3]
    assert counts(check(run.history(), full, committed_read)) == {}


def test_an_aborted_transactions_value_seen_at_read_committed_is_an_aborted_read():
    run, full, committed_read = transactional_run(FAIL, [b"a1", b"a2"])
    assert counts(check(run.history(), full, committed_read)) == {"aborted_read": 2}
    run, full, committed_read = transactional_run(FAIL, [b"a1", b"a2"])
    committed_read[0] = committed_read[0][:3]
    run.poll("committed-reader-1", (0, 3, b"a1"))
    assert counts(check(run.history(), full, committed_read)) == {"aborted_read": 1}


def test_a_transaction_seen_in_part_is_partial():
    run, full, committed_read = transactional_run(OK, [b"t1", b"t2"])
    committed_read[0] = committed_read[0][:4]
    assert counts(check(run.history(), full, committed_read)) == {"partial_txn": 1}
    run, full, committed_read = transactional_run(INFO, [b"t1", b"t2"])  # unknown: all or nothing
    committed_read[0] = committed_read[0][:4]
    assert counts(check(run.history(), full, committed_read)) == {"partial_txn": 1}
    run, full, committed_read = transactional_run(OK, [b"t1", b"t2"])
    committed_read[0] = committed_read[0][:3]
    assert counts(check(run.history(), full, committed_read)) == {"partial_txn": 1}


def leads(broker: int, partition: int, epoch: int, at_s: float, leader: bool = True) -> LeadershipEvent:
    return LeadershipEvent(broker, "t", partition, leader, epoch, WALL + at_s)


def test_leaders_one_after_another_are_fine():
    run, full = good_run()
    events = [leads(1, 0, 0, -1), leads(1, 0, 0, 2.5, leader=False), leads(2, 0, 1, 2.6), leads(2, 1, 0, -1)]
    assert counts(check(run.history(), full, leadership=events, topic="t")) == {}


def test_two_brokers_leading_at_one_epoch_is_split_leadership():
    run, full = good_run()
    events = [leads(1, 0, 0, -1), leads(2, 0, 0, 1.5)]
    assert counts(check(run.history(), full, leadership=events)) == {"split_leadership": 1}


def test_a_write_acknowledged_by_a_deposed_leader_is_split_leadership():
    run, full = good_run()
    # p1:2 (partition 1, invoked at second 7) was appended at epoch 0, yet broker 3 led at epoch 1 from second 5
    events = [leads(2, 1, 0, -1), leads(3, 1, 1, 5)]
    result = check(run.history(), full, leadership=events)
    assert counts(result) == {"split_leadership": 1}
    assert result.examples["split_leadership"] == [(value("p1", 2), 1, 0, (1, 3, WALL + 5))]
    assert counts(check(run.history(), full, leadership=events, topic="other")) == {}


def test_the_table_row_has_a_cell_per_verdict():
    run, full = good_run()
    del full[1][1]
    result = check(run.history(), full)
    result.label, result.recovery_s = "seed 7", 2.345
    header, row = result.table_header().split(" | "), result.table_row().split(" | ")
    assert len(header) == len(row) == len(VERDICTS) + 6
    assert dict(zip(header, row, strict=True)) == {
        "run": "seed 7", "faults": "1", "acked": "4", "lost": "1", "duplicated": "0", "reordered": "0",
        "offsets_back": "0", "read_then_absent": "0", "aborted_read": "0", "partial_txn": "0",
        "split_leadership": "0", "crashed": "0", "max_gap_s": "5.0", "recover_s": "2.3"}
    assert "lost: 1" in result.describe()


def test_leadership_is_read_from_the_brokers_json_log_lines(tmp_path):
    log = tmp_path / "broker-1.log"
    line = {"ts": "2026-01-01T00:00:01.250Z", "level": "INFO", "logger": "services.broker.partition",
            "message": "t-0: leads at leader epoch 3", "event": "leadership", "broker": 1, "topic": "t",
            "partition": 0, "leader": True, "leader_epoch": 3}
    log.write_text("not json, leadership\n" + json.dumps({"ts": "x", "message": "other"}) + "\n"
                   + json.dumps(line) + "\n")
    (event,) = read_leadership([log, tmp_path / "missing.log"])
    assert event == LeadershipEvent(1, "t", 0, True, 3, 1767225601.25)


def test_a_history_saved_and_loaded_is_the_same(tmp_path):
    run, _ = good_run()
    history = run.history()
    history.save(tmp_path / "history.jsonl")
    loaded = History.load(tmp_path / "history.jsonl")
    assert loaded.wall_offset_s == WALL
    as_lists = [(op.process, op.type, op.f, [list(r) for r in op.value] if op.f == "poll" and op.type == OK
                 else op.value, op.partition, op.offset, op.time_s) for op in history]
    assert [(op.process, op.type, op.f, op.value, op.partition, op.offset, op.time_s) for op in loaded] == as_lists

