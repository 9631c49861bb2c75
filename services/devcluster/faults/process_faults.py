"""Process faults on a loopback cluster, from a seed: kill -9 a broker and start it again, or stop
it with SIGSTOP and resume it with SIGCONT. One fault at a time, each followed by a pause.

    schedule = Schedule.generate(seed, cluster.broker_names, duration_s=30)
    run_schedule(cluster, schedule, stop_event, on_fault=record)

`run_schedule` returns when the schedule is done or `stop_event` is set, and always heals first:
every stopped broker resumed, every killed one started again (and one that died while stopped
reported as `crashed` and started again). The same seed gives the same
schedule, so a failing run replays.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.devcluster.faults.history import CRASHED, HEAL
from services.devcluster.launcher import LocalCluster

logger = logging.getLogger(__name__)

KILL, PAUSE = "kill", "pause"


@dataclass(frozen=True)
class Fault:
    """`action` (kill or pause) of `target` for `duration_s`, then `gap_s` before the next fault."""

    action: str
    target: str
    duration_s: float
    gap_s: float


@dataclass(frozen=True)
class Schedule:
    seed: int
    faults: tuple[Fault, ...]

    @classmethod
    def generate(cls, seed: int, targets: Sequence[str], duration_s: float = 30.0,
                 fault_s: tuple[float, float] = (1.0, 5.0), gap_s: tuple[float, float] = (2.0, 5.0)) -> Schedule:
        """Faults drawn from `seed` until their durations and gaps fill `duration_s`."""
        chooser = random.Random(seed)
        faults: list[Fault] = []
        total = 0.0
        while total < duration_s:
            fault = Fault(chooser.choice((KILL, PAUSE)), chooser.choice(sorted(targets)),
                          round(chooser.uniform(*fault_s), 2), round(chooser.uniform(*gap_s), 2))
            faults.append(fault)
            total += fault.duration_s + fault.gap_s
        return cls(seed, tuple(faults))

    def __len__(self) -> int:
        return len(self.faults)

    def describe(self) -> str:
        return f"seed {self.seed}: " + ", ".join(f"{f.action} {f.target} {f.duration_s:g}s" for f in self.faults)


def run_schedule(cluster: LocalCluster, schedule: Schedule, stop_event: threading.Event,
                 on_fault: Callable[[str, str], None] | None = None) -> None:
    """Applies each fault of `schedule` in turn (`on_fault(action, target)` as it starts, and
    `on_fault("heal", target)` as it ends), until done or `stop_event` is set; heals on the way out.
    A target that is not running when its fault is due is reported `crashed` and started instead."""
    killed: set[str] = set()
    paused: set[str] = set()
    note = on_fault or (lambda action, target: None)
    try:
        for fault in schedule.faults:
            if stop_event.is_set():
                break
            if cluster.running_pid(fault.target) is None:  # died after its last start
                note(CRASHED, fault.target)
                cluster.start_service(fault.target, wait=False)
                stop_event.wait(fault.duration_s + fault.gap_s)
                continue
            note(fault.action, fault.target)
            if fault.action == KILL:
                cluster.kill_service(fault.target)
                killed.add(fault.target)
            else:
                cluster.signal_service(fault.target, signal.SIGSTOP)
                paused.add(fault.target)
            stop_event.wait(fault.duration_s)
            _heal(cluster, killed, paused, note)
            note(HEAL, fault.target)
            if fault is not schedule.faults[-1]:
                stop_event.wait(fault.gap_s)
    finally:
        _heal(cluster, killed, paused, note)


def _heal(cluster: LocalCluster, killed: set[str], paused: set[str],
          note: Callable[[str, str], None] = lambda action, target: None) -> None:
    """Resumes the stopped and starts the killed (without waiting for them to serve); one found
    dead while stopped is reported (`note("crashed", name)`) and started again."""
    for name in sorted(paused):
        if cluster.running_pid(name) is None:
            note(CRASHED, name)
            killed.add(name)
        else:
            cluster.signal_service(name, signal.SIGCONT)
    paused.clear()
    for name in sorted(killed):
        cluster.start_service(name, wait=False)  # it waits out its old ZooKeeper session itself
    killed.clear()
