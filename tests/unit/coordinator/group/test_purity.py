"""The group coordinator's core stays pure: no grpc, kazoo, stubs, network or threads; short,
documented modules; its outcomes are data; and replaying the records its commands produced into
a fresh core gives the state the commands left."""

from __future__ import annotations

import ast
from pathlib import Path

import services.coordinator.group as group_package
from services.common.clock import ManualClock
from services.common.errors import Errors
from services.coordinator.group import CommittedOffset, GroupConfig, GroupCoordinatorCore, Outcome, TopicPartition
from services.coordinator.group.effects import JoinDeadline, TxnProducer
from services.coordinator.group.join_sync import JoinRequest
from tests.unit.controller.test_purity import imported_modules
from tests.unit.coordinator.group.support import subscription

FORBIDDEN = (
    "grpc", "kazoo", "services.common.pb", "socket", "fastapi", "requests", "threading", "concurrent",
    "asyncio", "queue", "services.coordinator.group.runtime", "services.common.scheduler",
)  # fmt: skip
ADAPTERS = {"runtime.py", "__init__.py"}  # the runtime (locks, timers, the store); the package's exports
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def core_files() -> list[Path]:
    package_dir = Path(group_package.__file__).parent
    return [p for p in sorted(package_dir.glob("*.py")) if p.name not in ADAPTERS]


def test_no_io_or_thread_imports():
    files = core_files()
    assert len(files) >= 10
    for path in files:
        for module in imported_modules(path):
            assert not module.startswith(FORBIDDEN), f"{path.name} imports {module}"


def test_modules_are_short_and_documented():
    for path in sorted(Path(group_package.__file__).parent.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 400, path.name
        assert ast.get_docstring(ast.parse(text)), path.name


class Driver:
    """Runs commands on a pure core, writes every append at once, and keeps the records (and
    transaction markers) written, each at its log offset."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.config = GroupConfig(group_initial_rebalance_delay_ms=0)
        self.core = GroupCoordinatorCore(self.config, self.clock)
        self.written: list[tuple[int, bytes | None, bytes | None, int, int | None]] = []
        self.next_offset: dict[int, int] = {}
        self.answers: dict[str, list] = {}
        self.timers: list = []

    def run(self, outcome: Outcome) -> Outcome:
        pending = [outcome]
        while pending:
            fx = pending.pop(0)
            for reply, result in fx.responses:
                self.answers.setdefault(reply, []).append(result)
            self.timers.extend(fx.timers)
            for append in fx.appends:
                first = self.next_offset.get(append.partition, 0)
                self.next_offset[append.partition] = first + len(append.records)
                producer = None if append.transaction is None else append.transaction.producer_id
                self.written.extend(
                    (append.partition, k, v, first + i, producer) for i, (k, v) in enumerate(append.records)
                )
                pending.append(self.core.on_append_done(append.append_id, Errors.NONE, first))
        return outcome

    def marker(self, group: str, producer_id: int, commit: bool) -> None:
        """The marker of `producer_id` written to the group's partition, then the transaction completed."""
        partition = self.core.manager.partition_for(group)
        position = self.next_offset.get(partition, 0)
        self.next_offset[partition] = position + 1
        self.written.append((partition, None, b"commit" if commit else b"abort", position, producer_id))
        assert self.run(self.core.handle_txn_completion(partition, producer_id, commit)).result == Errors.NONE

    def own_all(self, core: GroupCoordinatorCore) -> None:
        self.run(core.start())
        for partition in range(self.config.offsets_topic_num_partitions):
            self.run(core.begin_loading(partition))
            self.run(core.complete_loading(partition))

    def join(self, group: str, member_id: str, reply: str, instance: str | None = None) -> None:
        protocols = [("range", subscription("t"))]
        request = JoinRequest(member_id, instance, "client", "/h", 30000, 10000, "consumer", protocols, reply)
        self.run(self.core.handle_join_group(group, request))

    def fire_join_timers(self) -> None:
        """Fire every rebalance timer set so far, and those they set (initial delays of 0 ms)."""
        fired: set = set()
        while pending := [t.event for t in self.timers if isinstance(t.event, JoinDeadline) and t.event not in fired]:
            for event in pending:
                fired.add(event)
                self.run(self.core.on_timer(event))


def persisted(core: GroupCoordinatorCore) -> dict:
    """What the records hold of each group: generation, protocol, leader, members, offsets."""
    view = {}
    for group in core.manager.groups():
        members = {m.member_id: (m.group_instance_id, m.client_id, m.assignment) for m in group.members.values()}
        view[group.group_id] = (
            group.state.value, group.generation_id, group.protocol_type, group.protocol_name, group.leader_id,
            members, dict(group.offsets), {p: dict(o) for p, o in group.pending_txn_offsets.items()},
        )  # fmt: skip
    return view


def test_outcomes_are_data_and_replaying_their_records_gives_the_same_state():
    d = Driver()
    d.own_all(d.core)
    d.join("g", "", "j0")
    (required,) = d.answers["j0"]
    assert required.error_code == Errors.MEMBER_ID_REQUIRED
    d.join("g", required.member_id, "j1")
    d.join("g", "", "s1", instance="static-1")
    d.fire_join_timers()
    (first,), (second,) = d.answers["j1"], d.answers["s1"]
    assert first.generation_id == second.generation_id == 1
    leader = first.leader_id
    plan = {first.member_id: b"for-first", second.member_id: b"for-second"}
    for result, reply in ((first, "y1"), (second, "y2")):
        sent = plan if result.member_id == leader else {}
        d.run(d.core.handle_sync_group("g", 1, result.member_id, None, "consumer", "range", sent, reply))
    assert [a.assignment for a in d.answers["y1"] + d.answers["y2"]] == [b"for-first", b"for-second"]
    d.run(d.core.handle_commit_offsets("g", first.member_id, None, 1, {T0: CommittedOffset(7)}, "c1"))
    solo = {T0: CommittedOffset(3), T1: CommittedOffset(4)}
    d.run(d.core.handle_commit_offsets("solo", "", None, -1, solo, "c2"))
    d.run(d.core.handle_commit_offsets("gone", "", None, -1, {T1: CommittedOffset(9)}, "c3"))
    d.run(
        d.core.handle_txn_commit_offsets(
            "g", TxnProducer(70, 1), first.member_id, None, 1, {T1: CommittedOffset(8)}, "t1"
        )
    )
    d.marker("g", 70, commit=True)
    d.run(d.core.handle_txn_commit_offsets("solo", TxnProducer(71, 0), "", None, -1, {T1: CommittedOffset(2)}, "t2"))
    d.run(d.core.handle_commit_offsets("gone", "", None, -1, {T0: CommittedOffset(9)}, "c4"))
    d.run(d.core.handle_txn_commit_offsets("gone", TxnProducer(72, 0), "", None, -1, {T0: CommittedOffset(1)}, "t3"))
    d.run(d.core.handle_delete_groups(["gone"], "del"))
    assert d.answers["del"] == [{"gone": Errors.NONE}]
    assert d.answers["c2"] == [{T0: Errors.NONE, T1: Errors.NONE}]

    fresh = Driver()
    fresh.run(fresh.core.start())
    for partition in range(fresh.config.offsets_topic_num_partitions):
        fresh.run(fresh.core.begin_loading(partition))
        for written_partition, key, value, position, producer in d.written:
            if written_partition != partition:
                continue
            if key is None:  # a marker
                fresh.core.replay_marker(partition, producer, value == b"commit")
            else:
                fresh.core.replay(partition, key, value, position, producer)
        fresh.run(fresh.core.complete_loading(partition))

    live = persisted(d.core)
    assert set(live) == {"g", "solo", "gone"}
    assert live["g"][0] == "Stable"
    now = d.clock.time_ms()
    assert live["g"][6] == {
        T0: CommittedOffset(7, commit_timestamp_ms=now),
        T1: CommittedOffset(8, commit_timestamp_ms=now),
    }
    assert list(live["solo"][7]) == [71] and list(live["gone"][7]) == [72] and live["gone"][6] == {}
    assert persisted(fresh.core) == live
