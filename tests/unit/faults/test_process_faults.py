"""Seeded schedules of process faults: the same seed gives the same schedule, which fills its time."""

from __future__ import annotations

import signal
import threading

from services.devcluster.faults.history import CRASHED, HEAL
from services.devcluster.faults.process_faults import KILL, PAUSE, Fault, Schedule, run_schedule

BROKERS = ["broker-1", "broker-2", "broker-3"]


def test_a_seed_gives_one_schedule_of_kills_and_pauses_filling_its_time():
    schedule = Schedule.generate(7, BROKERS, duration_s=60)
    assert schedule == Schedule.generate(7, list(reversed(BROKERS)), duration_s=60)
    assert schedule != Schedule.generate(8, BROKERS, duration_s=60)
    assert {f.action for f in schedule.faults} == {KILL, PAUSE}
    assert {f.target for f in schedule.faults} <= set(BROKERS)
    total = sum(f.duration_s + f.gap_s for f in schedule.faults)
    assert 60 <= total < 60 + 10
    assert schedule.describe().startswith("seed 7: ")


class FakeCluster:
    def __init__(self, dies_when_stopped: str | None = None) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.dead: set[str] = set()
        self.dies_when_stopped = dies_when_stopped

    def running_pid(self, name: str) -> int | None:
        return None if name in self.dead else 1

    def kill_service(self, name: str) -> None:
        self.calls.append(("kill", name))

    def signal_service(self, name: str, signum: int) -> None:
        self.calls.append((signal.Signals(signum).name, name))
        if signum == signal.SIGSTOP and name == self.dies_when_stopped:
            self.dead.add(name)

    def start_service(self, name: str, wait: bool = True) -> None:
        self.calls.append(("start", name))
        self.dead.discard(name)


def test_each_fault_is_healed_before_the_next_and_reported():
    schedule = Schedule.generate(3, BROKERS, duration_s=0.05, fault_s=(0.0, 0.01), gap_s=(0.0, 0.01))
    cluster, noted = FakeCluster(), []
    run_schedule(cluster, schedule, threading.Event(), on_fault=lambda action, target: noted.append((action, target)))
    expected_calls, expected_notes = [], []
    for fault in schedule.faults:
        if fault.action == KILL:
            expected_calls += [("kill", fault.target), ("start", fault.target)]
        else:
            expected_calls += [("SIGSTOP", fault.target), ("SIGCONT", fault.target)]
        expected_notes += [(fault.action, fault.target), ("heal", fault.target)]
    assert (cluster.calls, noted) == (expected_calls, expected_notes)


def test_a_set_stop_event_ends_the_schedule_with_nothing_left_broken():
    schedule = Schedule.generate(3, BROKERS, duration_s=30)
    stop = threading.Event()
    stop.set()
    cluster = FakeCluster()
    run_schedule(cluster, schedule, stop)
    assert cluster.calls == []


def test_a_service_that_died_while_stopped_is_reported_and_started_again():
    schedule = Schedule(1, (Fault(PAUSE, "broker-2", 0.0, 0.0), Fault(KILL, "broker-1", 0.0, 0.0)))
    cluster, noted = FakeCluster(dies_when_stopped="broker-2"), []
    run_schedule(cluster, schedule, threading.Event(), on_fault=lambda action, target: noted.append((action, target)))
    assert cluster.calls == [("SIGSTOP", "broker-2"), ("start", "broker-2"), ("kill", "broker-1"),
                             ("start", "broker-1")]
    assert noted == [(PAUSE, "broker-2"), (CRASHED, "broker-2"), (HEAL, "broker-2"), (KILL, "broker-1"),
                     (HEAL, "broker-1")]
