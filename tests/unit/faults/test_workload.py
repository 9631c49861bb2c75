"""How a fault run records the faults of a schedule, whichever library's runner applies it."""

from __future__ import annotations

import threading
from typing import NamedTuple

from services.devcluster.faults.history import HEAL, INFO, NEMESIS, History
from services.devcluster.faults.workload import apply_schedule


def faults(history: History) -> list[tuple[str, str, str]]:
    return [(op.type, op.f, op.value) for op in history if op.process == NEMESIS]


def test_a_runner_taking_on_fault_records_each_fault_as_it_happens():
    def run_schedule(cluster, schedule, stop_event, on_fault=None):
        for target in schedule:
            on_fault("kill", target)
            on_fault(HEAL, target)

    history = History()
    apply_schedule(object(), ["broker-1", "broker-2"], run_schedule, threading.Event(), history)
    assert faults(history) == [(INFO, "kill", "broker-1"), (INFO, HEAL, "broker-1"),
                               (INFO, "kill", "broker-2"), (INFO, HEAL, "broker-2")]


class Op(NamedTuple):
    kind: str
    args: tuple[str, ...]

    def __str__(self) -> str:
        return ":".join((self.kind, *self.args))


class Record(NamedTuple):
    op: Op


def test_a_runner_returning_records_has_them_recorded_after_it_the_undoing_ones_as_heals():
    def run_schedule(cluster, schedule, stop_event):
        return [Record(Op("isolate", ("broker-1",))), Record(Op("heal", ())), Record(Op("pause", ("broker-2",))),
                Record(Op("resume", ("broker-2",)))]

    history = History()
    apply_schedule(object(), "a schedule", run_schedule, threading.Event(), history)
    assert faults(history) == [(INFO, "isolate", "isolate:broker-1"), (INFO, HEAL, "heal"),
                               (INFO, "pause", "pause:broker-2"), (INFO, HEAL, "resume:broker-2")]
