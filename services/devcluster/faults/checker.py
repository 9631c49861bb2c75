"""Verdicts on a fault run: from its `History`, the full read of every partition after the faults
healed, and the leadership lines of the brokers' logs.

- lost: a send acknowledged (`ok`) whose value the full read does not hold at the partition and
  offset of its acknowledgement (anywhere in that partition when the acknowledgement carried no
  offset, as librdkafka's for a retried batch the broker already had);
- duplicated: a value the full read holds more than once;
- reordered: within a partition, one producer's values out of its sequence order;
- offsets_back: a consumer handed a partition's offset at or before one it had already been
  handed, with no rebalance of that consumer in between;
- read_then_absent: a record a consumer was handed (value at its offset) that the full read does
  not hold there;
- aborted_read: a value of an aborted transaction handed to a read_committed reader (a consumer
  during the run or the full read at read_committed);
- partial_txn: a transaction of which a read_committed full read holds some values but not all,
  or a committed one of which it holds none;
- split_leadership: two brokers leading a partition at one leader epoch, or an acknowledged write
  appended by a leader after a broker had started leading the partition at a newer epoch (a deposed
  leader acknowledging beside its successor).

A broker's leadership comes from its `leadership` log lines (`services.broker.partition`): each
says which broker started or stopped leading which partition at which leader epoch, and when.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from services.common.logging_setup import LEADERSHIP_EVENT
from services.devcluster.faults.history import (
    CRASHED,
    FAIL,
    FAILED,
    HEAL,
    INFO,
    INVOKE,
    NEMESIS,
    OK,
    History,
    parse_value,
)

# Wall-clock slack between the history's times and the log lines' (whose times are truncated to
# the millisecond): a write counts as sent after a leader started only beyond this.
CLOCK_SLACK_S = 0.01
VERDICTS = ("lost", "duplicated", "reordered", "offsets_back", "read_then_absent", "aborted_read",
            "partial_txn", "split_leadership")
EXAMPLES_KEPT = 5


@dataclass(frozen=True)
class ReadRecord:
    """One record of the full read: its offset, value and the leader epoch of its batch."""

    offset: int
    value: bytes
    leader_epoch: int = -1


@dataclass(frozen=True)
class LeadershipEvent:
    """A broker started (`leader`) or stopped leading a partition at a leader epoch, at `time_s`
    (wall clock)."""

    broker: int
    topic: str
    partition: int
    leader: bool
    leader_epoch: int
    time_s: float


@dataclass
class Result:
    """Counts per verdict, with a few examples of each that fired, and the run's figures."""

    faults: int = 0
    acknowledged: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    examples: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    recovery_s: float | None = None
    label: str = ""
    errors: list[str] = field(default_factory=list)  # what went wrong in the workload itself
    leadership_events: int = 0  # leadership lines of the topic read from the brokers' logs
    writes_attributed: int = 0  # acknowledged writes whose leader epoch the full read gave
    longest_ack_gap_s: float = 0.0  # longest time a partition went without an acknowledged write
    crashed: list[str] = field(default_factory=list)  # services found dead that no fault had killed

    def add(self, verdict: str, example: object) -> None:
        self.counts[verdict] += 1
        if len(self.examples[verdict]) < EXAMPLES_KEPT:
            self.examples[verdict].append(example)

    @property
    def violations(self) -> int:
        return sum(self.counts.values())

    @staticmethod
    def table_header() -> str:
        columns = ["run", "faults", "acked", *VERDICTS, "crashed", "max_gap_s", "recover_s"]
        return " | ".join(columns)

    def table_row(self) -> str:
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.1f}"
        cells = [self.label or "-", str(self.faults), str(self.acknowledged),
                 *(str(self.counts[v]) for v in VERDICTS), str(len(self.crashed)), f"{self.longest_ack_gap_s:.1f}",
                 recovery]
        return " | ".join(cells)

    def describe(self) -> str:
        """The counts and the examples of every verdict that fired."""
        lines = [f"{self.acknowledged} acknowledged writes ({self.writes_attributed} with their leader's "
                 f"epoch), {self.faults} faults, {self.leadership_events} leadership lines, "
                 f"{self.violations} violations; longest time a partition went without an acknowledged "
                 f"write {self.longest_ack_gap_s:.1f} s; found dead: {self.crashed or 'none'}"]
        for verdict in VERDICTS:
            if self.counts[verdict]:
                lines.append(f"  {verdict}: {self.counts[verdict]}, e.g. {self.examples[verdict]}")
        return "\n".join(lines)


def check(history: History, full_read: Mapping[int, list[ReadRecord]],
          committed_read: Mapping[int, list[ReadRecord]] | None = None,
          leadership: Iterable[LeadershipEvent] = (), topic: str | None = None) -> Result:
    """Every verdict on one run. `full_read` is every partition's records at read_uncommitted;
    `committed_read` the same at read_committed (for the transaction verdicts); `leadership` the
    brokers' leadership events, of `topic` when given."""
    result = Result()
    ops = history.ops
    nemesis = [op for op in ops if op.process == NEMESIS and op.type == INFO]
    result.faults = sum(1 for op in nemesis if op.f not in (HEAL, CRASHED, FAILED))
    result.crashed = [op.value for op in nemesis if op.f == CRASHED]
    acknowledged = [op for op in ops if op.f == "send" and op.type == OK]
    result.acknowledged = len(acknowledged)
    result.longest_ack_gap_s = _longest_ack_gap_s(acknowledged)
    _check_writes(result, acknowledged, full_read)
    _check_consumers(result, ops, full_read)
    _check_transactions(result, ops, committed_read)
    events = [e for e in leadership if topic is None or e.topic == topic]
    _check_leadership(result, history, acknowledged, full_read, events)
    return result


def _check_writes(result: Result, acknowledged: list, full_read: Mapping[int, list[ReadRecord]]) -> None:
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in full_read.items():
        for record in records:
            where[record.value].append((partition, record.offset))
    for op in acknowledged:
        places = where.get(op.value, ())
        if op.offset is None and op.partition in {partition for partition, _ in places}:
            continue  # acknowledged without an offset: held in its partition is enough
        if (op.partition, op.offset) not in places:
            result.add("lost", (op.value, op.partition, op.offset, where.get(op.value, [])))
    for value, places in where.items():
        if len(places) > 1:
            result.add("duplicated", (value, places))
    for partition, records in full_read.items():
        last: dict[str, tuple[int, int]] = {}
        for record in records:
            try:
                producer, sequence = parse_value(record.value)
            except ValueError:
                continue  # not a workload value
            before = last.get(producer)
            if before is not None and sequence < before[0]:  # a repeat is a duplicate, not a reordering
                result.add("reordered", (partition, producer, before, (sequence, record.offset)))
            last[producer] = (sequence, record.offset)


def _longest_ack_gap_s(acknowledged: list) -> float:
    """The longest time between two acknowledgements of one partition (availability, not a verdict)."""
    times: dict[int, list[float]] = defaultdict(list)
    for op in acknowledged:
        times[op.partition].append(op.time_s)
    return max((later - earlier for ts in times.values() for earlier, later in zip(ts, ts[1:], strict=False)),
               default=0.0)


def _check_consumers(result: Result, ops: list, full_read: Mapping[int, list[ReadRecord]]) -> None:
    at_offset = {(p, r.offset): r.value for p, records in full_read.items() for r in records}
    last_offset: dict[tuple[str, int], int] = {}
    for op in ops:
        if op.f in ("assigned", "revoked") and op.type == INFO:
            for key in [k for k in last_offset if k[0] == op.process]:
                del last_offset[key]
        elif op.f == "poll" and op.type == OK:
            for partition, offset, value in op.value:
                key = (op.process, partition)
                if key in last_offset and offset <= last_offset[key]:
                    result.add("offsets_back", (op.process, partition, last_offset[key], offset))
                last_offset[key] = offset
                if at_offset.get((partition, offset)) != value:
                    result.add("read_then_absent", (op.process, partition, offset, value))


def _check_transactions(result: Result, ops: list, committed_read: Mapping[int, list[ReadRecord]] | None) -> None:
    transactions = [op for op in ops if op.f == "txn" and op.type in (OK, FAIL, INFO)]
    aborted = {value for op in transactions if op.type == FAIL for value in op.value}
    for op in ops:
        if op.f == "poll" and op.type == OK and op.process.startswith("committed-reader"):
            for partition, offset, value in op.value:
                if value in aborted:
                    result.add("aborted_read", (op.process, partition, offset, value))
    if committed_read is None:
        return
    visible = Counter(r.value for records in committed_read.values() for r in records)
    for value in aborted & set(visible):
        result.add("aborted_read", ("full read", value))
    for op in transactions:
        seen = sum(1 for value in op.value if visible[value])
        if (0 < seen < len(op.value)) or (op.type == OK and seen == 0 and op.value):
            result.add("partial_txn", (op.process, op.type, seen, len(op.value)))


def _check_leadership(result: Result, history: History, acknowledged: list,
                      full_read: Mapping[int, list[ReadRecord]], events: list[LeadershipEvent]) -> None:
    started: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)  # (partition, epoch) -> broker -> time
    result.leadership_events = len(events)
    for event in events:
        if event.leader:
            leaders = started[(event.partition, event.leader_epoch)]
            leaders.setdefault(event.broker, event.time_s)
            if len(leaders) == 2:
                result.add("split_leadership", (event.partition, event.leader_epoch, sorted(leaders)))
    epoch_of = {(p, r.value): r.leader_epoch for p, records in full_read.items() for r in records}
    invoked_at = {(op.process, op.value): history.wall_time_s(op) for op in history.ops
                  if op.f == "send" and op.type == INVOKE}
    for op in acknowledged:
        epoch = epoch_of.get((op.partition, op.value))
        if epoch is None or epoch < 0:
            continue
        result.writes_attributed += 1
        invoked_s = invoked_at.get((op.process, op.value), history.wall_time_s(op))
        newer = [(e, broker, start) for (p, e), leaders in started.items() if p == op.partition and e > epoch
                 for broker, start in leaders.items() if start + CLOCK_SLACK_S < invoked_s]
        if newer:
            result.add("split_leadership", (op.value, op.partition, epoch, min(newer)))


def read_leadership(log_paths: Iterable[Path]) -> list[LeadershipEvent]:
    """The leadership events of the brokers' JSON log lines, in the order of each file."""
    events = []
    for path in log_paths:
        if not Path(path).exists():
            continue
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if LEADERSHIP_EVENT not in line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("event") != LEADERSHIP_EVENT:
                    continue
                moment = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp()
                events.append(LeadershipEvent(int(entry["broker"]), entry["topic"], int(entry["partition"]),
                                              bool(entry["leader"]), int(entry["leader_epoch"]), moment))
    return events
