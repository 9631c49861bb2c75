"""Real threads: members of one group on their own threads, a store answering from its own thread,
timers on a Scheduler's thread. Checks that the coordinator converges and never deadlocks."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors
from services.common.scheduler import Scheduler
from services.coordinator.group import CommittedOffset as OM
from services.coordinator.group import GroupConfig, GroupCoordinator, TopicPartition

DEADLINE_S = 20
MEMBERS = 4


class ThreadedStore:
    """Answers every append from a worker thread, in order."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Callable[[int], None] | None] = queue.Queue()
        self.appended = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def append(self, partition: int, records: list, callback: Callable[[int], None]) -> None:
        self.appended += 1
        self._queue.put(callback)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(5)

    def _run(self) -> None:
        while (callback := self._queue.get()) is not None:
            callback(0)


def call(fn: Callable[..., None], *args) -> object:
    """Call a callback-style handler and wait (with a deadline) for its answer."""
    answered = threading.Event()
    box: list[object] = []
    fn(*args, lambda value: (box.append(value), answered.set()))
    assert answered.wait(DEADLINE_S), f"no answer from {fn.__name__}"
    return box[0]


def test_members_on_threads_converge_without_deadlock():
    scheduler = Scheduler(SYSTEM_CLOCK)
    scheduler.startup()
    store = ThreadedStore()
    config = GroupConfig(group_initial_rebalance_delay_ms=50)
    coordinator = GroupCoordinator(config, SYSTEM_CLOCK, scheduler, store)
    coordinator.start()
    for partition in range(config.offsets_topic_num_partitions):
        coordinator.begin_loading(partition)
        coordinator.complete_loading(partition)
    committed = threading.Barrier(MEMBERS + 1)
    stop = threading.Event()
    failures: list[BaseException] = []

    def member(index: int) -> None:
        tp = TopicPartition("t", index)
        member_id, generation, has_committed = "", -1, False
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                joined = call(coordinator.handle_join_group, "shared", member_id, None, f"c{index}", "h",
                              2000, 10000, "consumer", [("range", b"")])  # fmt: skip
                if joined.error_code == Errors.MEMBER_ID_REQUIRED:
                    member_id = joined.member_id
                    continue
                assert joined.error_code == Errors.NONE, joined
                generation = joined.generation_id
                assignments = {m.member_id: b"" for m in joined.members}
                synced = call(coordinator.handle_sync_group, "shared", generation, member_id, None,
                              "consumer", "range", assignments)  # fmt: skip
                if synced.error_code == Errors.REBALANCE_IN_PROGRESS:
                    continue
                assert synced.error_code == Errors.NONE, synced
                while not stop.is_set():
                    result = call(coordinator.handle_commit_offsets, "shared", member_id, None, generation,
                                  {tp: OM(index + 1)})  # fmt: skip
                    if result[tp] != Errors.NONE:
                        break
                    if not has_committed:
                        has_committed = True
                        committed.wait(DEADLINE_S)
                    if coordinator.handle_heartbeat("shared", member_id, None, generation) != Errors.NONE:
                        break
                    stop.wait(0.01)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)
            committed.abort()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(MEMBERS)]
    try:
        for thread in threads:
            thread.start()
        committed.wait(DEADLINE_S)  # every member committed at least once in some generation
        stop.set()
        for thread in threads:
            thread.join(DEADLINE_S)
            assert not thread.is_alive(), "a member thread is stuck"
        assert failures == []
        error, offsets = coordinator.handle_fetch_offsets("shared", None)
        assert error == Errors.NONE
        assert {tp.partition: f.offset for tp, f in offsets.items()} == {i: i + 1 for i in range(MEMBERS)}
        assert 1 <= len(coordinator.handle_describe_group("shared").members) <= MEMBERS
    finally:
        stop.set()
        coordinator.shutdown()
        scheduler.shutdown()
        store.close()


def test_callbacks_run_without_the_coordinator_lock_held():
    from tests.unit.coordinator.group.support import Harness

    h = Harness()
    lock_free = []

    def on_join(result) -> None:
        def probe() -> None:  # another command: it needs the lock the runtime takes
            lock_free.append(h.coordinator.handle_describe_group("group-a").group_id)

        thread = threading.Thread(target=probe)
        thread.start()
        thread.join(10)

    h.coordinator.handle_join_group("group-a", "", None, "c", "h", 30000, 10000, "consumer", [("range", b"")], on_join)
    assert lock_free == ["group-a"]
