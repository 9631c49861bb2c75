"""Seeded nemesis schedules: the same seed gives the same steps, a schedule's one line parses back
into it, every fault is undone by the duration, and ops and link settings parse."""

from __future__ import annotations

import threading
import time

import pytest

from services.clients.cli import main as cli_main
from services.devcluster.launcher import LocalCluster
from services.devcluster.nemesis import (
    ALL_KINDS,
    Nemesis,
    NemesisError,
    Op,
    Schedule,
    Step,
    parse_link_settings,
    run_schedule,
)

HOSTS = ["zookeeper", "controller-1001", "broker-1", "broker-2", "broker-3", "coordinator-2001"]
UNDO = {"isolate": "heal", "split": "heal", "drop": "heal", "link": "unlink", "pause": "resume",
        "kill": "restart", "skew": "unskew"}


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
def test_the_same_seed_gives_the_same_schedule(seed):
    first = Schedule.generate(seed, HOSTS, 60)
    assert first == Schedule.generate(seed, HOSTS, 60)
    assert first.steps and all(isinstance(step, Step) for step in first)


def test_different_seeds_give_different_schedules():
    assert len({str(Schedule.generate(seed, HOSTS, 60)) for seed in range(20)}) == 20


@pytest.mark.parametrize("seed", range(10))
def test_a_schedule_prints_as_one_line_that_parses_back(seed):
    schedule = Schedule.generate(seed, HOSTS, 45)
    line = str(schedule)
    assert "\n" not in line
    assert Schedule.parse(line) == schedule
    assert str(Schedule.parse(line)) == line


@pytest.mark.parametrize("seed", range(30))
def test_each_fault_is_undone_in_order_and_by_the_duration(seed):
    schedule = Schedule.generate(seed, HOSTS, 40)
    times = [step.at_s for step in schedule]
    assert times == sorted(times)
    assert 0 < times[0] and times[-1] <= 40
    steps = list(schedule)
    for fault, undo in zip(steps[::2], steps[1::2], strict=True):
        assert fault.op in UNDO and undo.op == UNDO[fault.op], (fault, undo)
        if undo.op != "heal":
            assert undo.args == fault.args[:1]
        named = fault.args if fault.op in ("split", "drop") else fault.args[:1]
        assert all(host in HOSTS for group in named for host in group.split("+")), fault


def test_kinds_limit_the_faults_and_processes_exclude_zookeeper():
    for seed in range(30):
        schedule = Schedule.generate(seed, HOSTS, 60, kinds=("kill", "skew"))
        for step in schedule:
            assert step.op in ("kill", "restart", "skew", "unskew")
            assert step.args[0] != "zookeeper"
    assert {step.op for seed in range(30) for step in Schedule.generate(seed, HOSTS, 60)} >= set(UNDO) | set(
        UNDO.values())
    with pytest.raises(ValueError, match="unknown kinds"):
        Schedule.generate(1, HOSTS, 10, kinds=("meteor",))
    with pytest.raises(ValueError, match="too few hosts"):
        Schedule.generate(1, ["broker-1"], 10, kinds=("split",))
    assert set(ALL_KINDS) == {"isolate", "split", "drop", "loss", "link", "pause", "kill", "skew"}


def test_splits_are_two_disjoint_groups_covering_every_host():
    for seed in range(30):
        for step in Schedule.generate(seed, HOSTS, 60, kinds=("split",)):
            if step.op == "split":
                side_a, side_b = (group.split("+") for group in step.args)
                assert not set(side_a) & set(side_b)
                assert sorted(side_a + side_b) == sorted(HOSTS)
                assert 1 <= len(side_a) <= len(HOSTS) // 2


def test_ops_and_link_settings_parse():
    assert Op.parse("split:broker-1+zookeeper:broker-2") == Op("split", ("broker-1+zookeeper", "broker-2"))
    assert str(Op("skew", ("broker-1", "+30s"))) == "skew:broker-1:+30s"
    assert Op.parse("heal") == Op("heal")
    assert parse_link_settings("loss=5,delay_ms=50,jitter_ms=10,reorder=25") == {
        "loss": 5, "delay_ms": 50, "jitter_ms": 10, "reorder": 25}
    with pytest.raises(NemesisError, match="unknown link setting"):
        parse_link_settings("latency=5")


def test_the_runner_records_failures_goes_on_and_stops_on_its_event(tmp_path):
    nemesis = Nemesis(LocalCluster(tmp_path, brokers=0, controllers=0))  # laid out, never started
    schedule = Schedule(1, 1.0, ("broker-1",), ("kill",), [Step(0.0, "kill", ("broker-1",)),
                                                            Step(0.05, "isolate", ("broker-1",)),
                                                            Step(30.0, "pause", ("broker-1",))])
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    records = run_schedule(nemesis, schedule, stop)
    timer.join()
    assert [str(record.op) for record in records] == ["kill:broker-1", "isolate:broker-1"]
    assert not any(record.ok for record in records)
    assert "no service 'broker-1'" in records[0].detail
    assert "need a cluster started on a HostNetwork" in records[1].detail
    assert records[0].due_at is not None


class _SlowNemesis(Nemesis):
    """A nemesis whose one op takes a while, as a restart does."""

    def _op_slow(self) -> str:
        time.sleep(0.3)
        return "slept 0.3 s"


def test_the_schedule_clock_stands_still_while_an_op_is_applied(tmp_path):
    nemesis = _SlowNemesis(LocalCluster(tmp_path, brokers=0, controllers=0))
    schedule = Schedule(1, 1.0, (), (), [Step(0.0, "slow"), Step(0.1, "slow"), Step(0.2, "slow")])
    records = run_schedule(nemesis, schedule)
    assert [record.ok for record in records] == [True, True, True]
    starts = [record.started_at for record in records]
    assert starts[1] - starts[0] >= 0.4 - 0.02 and starts[2] - starts[1] >= 0.4 - 0.02  # 0.3 applying + 0.1 calm
    assert records[1].due_at - records[0].due_at == pytest.approx(0.4, abs=0.05)


def test_dev_nemesis_prints_a_schedule_that_replays(tmp_path, capsys):
    LocalCluster(tmp_path, brokers=3, controllers=1).write_layout()  # laid out, never started
    assert cli_main(["dev", "nemesis", "--dir", str(tmp_path), "--seed", "3", "--duration", "30",
                     "--kinds", "pause,kill", "--dry-run"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line == str(Schedule.generate(3, ["controller-1001", "broker-1", "broker-2", "broker-3"], 30,
                                         ("pause", "kill")))
    assert cli_main(["dev", "nemesis", "--dir", str(tmp_path), "--replay", line, "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == line
