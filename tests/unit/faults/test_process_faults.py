"""Seeded schedules of process faults are nemesis schedules of kills and pauses of the brokers."""

from __future__ import annotations

from services.devcluster.faults.process_faults import PROCESS_FAULT_KINDS, process_schedule
from services.devcluster.nemesis import Schedule

BROKERS = ["broker-1", "broker-2", "broker-3"]
UNDO = {"kill": "restart", "pause": "resume"}


def test_a_seed_gives_one_schedule_of_kills_and_pauses_filling_its_time():
    schedule = process_schedule(7, BROKERS, duration_s=60)
    assert schedule == process_schedule(7, list(reversed(BROKERS)), duration_s=60)
    assert schedule != process_schedule(8, BROKERS, duration_s=60)
    assert Schedule.parse(str(schedule)) == schedule
    faults, undos = schedule.steps[::2], schedule.steps[1::2]
    assert {step.op for step in faults} == set(PROCESS_FAULT_KINDS)
    assert all(undo.op == UNDO[fault.op] and undo.args == fault.args for fault, undo in zip(faults, undos, strict=True))
    assert {step.args[0] for step in schedule} <= set(BROKERS)
    assert schedule.steps[-1].at_s <= 60
