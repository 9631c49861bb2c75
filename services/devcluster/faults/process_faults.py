"""Process faults on a cluster's brokers, from a seed: kill -9 and restart, SIGSTOP and SIGCONT.
They are `nemesis` schedules of the kinds `kill` and `pause` over the brokers, run by
`nemesis.run_schedule` (one schedule type, one runner):

    schedule = process_schedule(seed, cluster.broker_names, duration_s=30)
    run_with_faults(cluster, schedule, run_schedule, config)

The same seed gives the same schedule (`str(schedule)` is a line `Schedule.parse` replays).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.devcluster.nemesis import Schedule, run_schedule

__all__ = ["PROCESS_FAULT_KINDS", "Schedule", "process_schedule", "run_schedule"]

PROCESS_FAULT_KINDS = ("kill", "pause")
FAULT_HOLD_S = (1.0, 5.0)
FAULT_GAP_S = (2.0, 5.0)


def process_schedule(seed: int, brokers: Sequence[str], duration_s: float = 30.0) -> Schedule:
    """Kills and pauses of `brokers` (whatever their order) drawn from `seed`, filling `duration_s`."""
    return Schedule.generate(seed, sorted(brokers), duration_s, kinds=PROCESS_FAULT_KINDS,
                             hold_s=FAULT_HOLD_S, gap_s=FAULT_GAP_S)
