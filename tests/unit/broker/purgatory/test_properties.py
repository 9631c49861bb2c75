"""Property tests: random schedules of adds, re-adds, cancels and clock steps against a simple model.

Timer: every scheduled task fires exactly once, never before its deadline, and no later than the
first expiry pass at or after its deadline rounded up to the tick (< deadline + tick); cancelled or
superseded schedules never fire. Purgatory: every operation completes exactly once, by a key check
or by expiry, and nothing is left watched after a purge.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from services.broker.purgatory import DelayedOperationPurgatory, SystemTimer, TimerTask

from .support import MockOperation, manual_clock

delays_ms = st.one_of(
    st.integers(0, 60),
    st.integers(0, 3_000),
    st.sampled_from([0, 1, 19, 20, 21, 399, 400, 401, 8_000, 160_000, 10**6]),
)
actions = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 7), delays_ms),
        st.tuples(st.just("cancel"), st.integers(0, 7), st.just(0)),
        st.tuples(st.just("advance"), st.just(0), st.integers(0, 50)),
        st.tuples(st.just("advance"), st.just(0), st.integers(0, 2_000)),
    ),
    max_size=60,
)


@dataclass
class Schedule:
    deadline_ms: int
    rounded_ms: int
    added_at_pass: int
    void: bool = False
    fired_ms: int | None = None
    fired_at_pass: int | None = None


class ModelTask(TimerTask):
    def __init__(self, run) -> None:
        super().__init__(0)
        self._on_run = run

    def run(self) -> None:
        self._on_run(self)


@settings(max_examples=300, deadline=None)
@given(tick_ms=st.sampled_from([1, 1, 2, 5]), wheel_size=st.sampled_from([2, 3, 8, 20]), steps=actions)
def test_timer_fires_each_schedule_once_within_a_tick_of_its_deadline(tick_ms, wheel_size, steps) -> None:
    clock = manual_clock()
    clock.advance(37)
    timer = SystemTimer("model", clock, tick_ms=tick_ms, wheel_size=wheel_size)
    passes: list[int] = []  # clock time of each advance_clock call, by index
    current: dict[int, Schedule] = {}
    schedules: list[Schedule] = []
    double_fires: list[int] = []

    def on_run(task: ModelTask) -> None:
        schedule = current[task_ids[id(task)]]
        if schedule.fired_ms is not None or schedule.void:
            double_fires.append(task_ids[id(task)])
        schedule.fired_ms = clock.monotonic_ms()
        schedule.fired_at_pass = len(passes)

    tasks = [ModelTask(on_run) for _ in range(8)]
    task_ids = {id(task): i for i, task in enumerate(tasks)}

    def expire() -> None:
        passes.append(clock.monotonic_ms())
        timer.advance_clock(0)

    for kind, index, amount in steps:
        previous = current.get(index)
        if kind == "add":
            if previous is not None and previous.fired_ms is None:
                previous.void = True
            now_ms = clock.monotonic_ms()
            deadline_ms = now_ms + amount
            rounded_ms = -(-deadline_ms // tick_ms) * tick_ms
            current[index] = schedule = Schedule(deadline_ms, rounded_ms, len(passes))
            schedules.append(schedule)
            tasks[index].delay_ms = amount
            timer.add(tasks[index])
        elif kind == "cancel":
            if previous is not None and previous.fired_ms is None:
                previous.void = True
            tasks[index].cancel()
        else:
            clock.advance(amount)
            expire()
    latest_ms = max((s.rounded_ms for s in schedules), default=0)
    clock.advance(max(0, latest_ms - clock.monotonic_ms()))
    expire()

    assert double_fires == []
    assert timer.size == 0
    for schedule in schedules:
        if schedule.void:
            assert schedule.fired_ms is None
            continue
        assert schedule.fired_ms is not None, schedule
        assert schedule.fired_ms >= schedule.deadline_ms
        assert schedule.rounded_ms < schedule.deadline_ms + tick_ms
        first_due_pass = next(
            i for i in range(schedule.added_at_pass, len(passes)) if passes[i] >= schedule.rounded_ms
        )
        # fired_at_pass is i + 1 for a run inside pass i, so this means "in pass first_due_pass or earlier"
        assert schedule.fired_at_pass <= first_due_pass + 1, (schedule, passes)


purgatory_steps = st.lists(
    st.one_of(
        st.tuples(st.just("watch"), st.integers(0, 5), st.integers(1, 1_000)),
        st.tuples(st.just("ready"), st.integers(0, 39), st.integers(0, 5)),
        st.tuples(st.just("advance"), st.just(0), st.integers(0, 400)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(steps=purgatory_steps, purge_interval=st.sampled_from([0, 3, 1_000]))
def test_purgatory_completes_every_operation_exactly_once(steps, purge_interval) -> None:
    clock = manual_clock()
    purgatory = DelayedOperationPurgatory(
        "model", SystemTimer("model", clock), purge_interval=purge_interval, reaper_enabled=False
    )
    ops: list[tuple[MockOperation, int]] = []
    completed_by_check = 0
    for kind, a, b in steps:
        if kind == "watch":
            op = MockOperation(b)
            ops.append((op, clock.monotonic_ms() + b))
            assert not purgatory.try_complete_else_watch(op, [("t", a), ("t", (a + 1) % 6)])
        elif kind == "ready" and ops:
            op, deadline_ms = ops[a % len(ops)]
            op.ready = True
            done_before = op.is_completed
            completed = purgatory.check_and_complete(("t", b))
            completed_by_check += completed
            if not done_before and clock.monotonic_ms() < deadline_ms and completed:
                assert op.expirations == 0
        else:
            clock.advance(b)
            purgatory.advance_clock(0)
            for op, deadline_ms in ops:
                assert op.is_completed == (op.completions == 1)
                if clock.monotonic_ms() >= deadline_ms:
                    assert op.is_completed
                if op.expirations:
                    assert clock.monotonic_ms() >= deadline_ms
    clock.advance(1_000)
    purgatory.advance_clock(0)
    assert all(op.completions == 1 for op, _ in ops)
    assert completed_by_check + sum(op.expirations for op, _ in ops) == len(ops)
    assert purgatory.delayed == 0
    purgatory.purge_completed()
    assert (purgatory.watched, purgatory.watch_keys) == (0, 0)
    purgatory.shutdown()
