"""Network faults on a cluster whose ZooKeeper and services each run on a host of their own (a
network namespace on a bridge of the run), under the fault workload (idempotent acks=all producers,
group consumers, a transactional producer and a read_committed reader on an RF=3,
min.insync.replicas=2 topic): a short fixed set of scenarios, each a few seconds of one fault, and
every verdict zero. A scenario's hosts are chosen when it starts (the leader of partition 0, the
group's coordinator, ...) and its schedule is printed as a line `Schedule.parse` replays.

Also the replay of a fault that killed a broker: stopped (SIGSTOP) while it started, past its
ZooKeeper session, it died of a connection loss in its first ZooKeeper call; it now waits out the
loss, as Kafka's broker does, and serves."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import pytest

from services.clients.admin import Admin
from services.common.topic_partition import TopicPartition
from services.devcluster.faults.workload import WorkloadConfig, run_with_faults
from services.devcluster.launcher import ZOOKEEPER_HOST, LocalCluster
from services.devcluster.nemesis import Nemesis, Schedule, Step, link_queue_supported, run_schedule
from services.devcluster.netns import HostNetwork
from services.devcluster.proc import process_state, wait_until
from tests.integration.conftest import (
    CLIENT_CONFIG,
    TEARDOWN_STOP_TIMEOUT_S,
    TEST_BROKER_CONFIG,
    TEST_CONTROLLER_CONFIG,
    TEST_COORDINATOR_CONFIG,
    zk_session,
)
from tests.netns_support import host_network

pytestmark = pytest.mark.timeout(180)

CONTROLLERS, BROKERS, COORDINATORS = 1, 3, 2
# a broker cut off from ZooKeeper loses its partitions once its session expires: short
BROKER_SESSION_TIMEOUT_MS = 3000
FAULT_S = 4.0  # each scenario's fault is held this long, from CALM_S into the run
CALM_S = 1.0
LINK_FAULT = "loss=5,delay_ms=50,jitter_ms=50"  # on every host's link
START_UP_DELAY_MS = 200  # on a starting broker's link: its first ZooKeeper calls take seconds


@pytest.fixture(scope="module")
def network() -> Iterator[HostNetwork]:
    with host_network(CONTROLLERS, BROKERS, COORDINATORS, "network faults") as network:
        yield network


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, network: HostNetwork, tmp_path_factory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("network-faults"), brokers=BROKERS, controllers=CONTROLLERS,
                           coordinators=COORDINATORS, network=network,
                           broker_config={**TEST_BROKER_CONFIG,
                                          "zookeeper.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS},
                           controller_config=TEST_CONTROLLER_CONFIG, coordinator_config=TEST_COORDINATOR_CONFIG)
    failures_before = request.session.testsfailed
    try:
        cluster.start()
        yield cluster
    finally:
        if request.session.testsfailed > failures_before:
            print(f"\n===== service logs of {cluster.base_dir} =====\n{cluster.dump_logs()}")
        for name in cluster.all_names:  # nothing is read after the run: no controlled shutdown to wait for
            if cluster.running_pid(name) is not None:
                cluster.kill_service(name)
        cluster.stop(timeout_s=TEARDOWN_STOP_TIMEOUT_S)  # ZooKeeper


@pytest.fixture(scope="module")
def nemesis(cluster: LocalCluster) -> Iterator[Nemesis]:
    nemesis = Nemesis(cluster)
    yield nemesis
    nemesis.heal_all()


# ---------------------------------------------------------------------- scenarios

@dataclass(frozen=True)
class Targets:
    """The hosts a scenario acts on, as they are when it starts."""

    leader: str  # of the workload topic's partition 0
    followers: tuple[str, ...]  # its other replicas
    controller: str  # the active controller
    coordinator: str  # the coordinator of the group reading the topic
    hosts: tuple[str, ...]


SCENARIOS: dict[str, Callable[[Targets], list[str]]] = {
    "leader-isolated": lambda t: [f"isolate:{t.leader}", "heal"],
    "leader-cut-from-zookeeper": lambda t: [f"split:{t.leader}:{ZOOKEEPER_HOST}", "heal"],
    "controller-cut-from-brokers": lambda t: [
        f"split:{t.controller}:{'+'.join(h for h in t.hosts if h.startswith('broker-'))}", "heal"],
    "follower-isolated-then-healed": lambda t: [f"isolate:{t.followers[0]}", "heal"],
    "brokers-split-zookeeper-with-majority": lambda t: [
        f"split:{t.leader}:{'+'.join(h for h in t.hosts if h != t.leader and not h.startswith('coordinator-'))}",
        "heal"],
    "coordinator-isolated-while-group-commits": lambda t: [f"isolate:{t.coordinator}", "heal"],
}


def _link_everywhere(t: Targets) -> list[list[str]]:
    return [[f"link:{host}:{LINK_FAULT}" for host in t.hosts], [f"unlink:{host}" for host in t.hosts]]


def targets(cluster: LocalCluster, admin: Admin, topic: str) -> Targets:
    with zk_session(cluster.zookeeper_connect) as zk:
        state = zk.get_partition_state(TopicPartition(topic, 0)).value
        replicas = zk.get_topic_assignment(topic).value.partitions[0].replicas
        controller_id = zk.get_controller().controller_id
    leader = cluster.broker_name(state.leader)
    followers = tuple(cluster.broker_name(b) for b in replicas if b != state.leader)
    controller = f"controller-{controller_id}"
    group = admin.describe_consumer_groups([f"{topic}-readers"])[f"{topic}-readers"]
    coordinator = f"coordinator-{group.coordinator.node_id}"
    return Targets(leader, followers, controller, coordinator, tuple(cluster.network.hosts))


def scenario_schedule(name: str, t: Targets) -> Schedule:
    """The scenario's fault at CALM_S, held FAULT_S, then undone (several ops at once for a link
    fault on every host)."""
    if name == "loss-and-jitter-everywhere":
        faults, undos = _link_everywhere(t)
    else:
        fault, undo = SCENARIOS[name](t)
        faults, undos = [fault], [undo]
    steps = [Step(CALM_S, *_op(text)) for text in faults] + [Step(CALM_S + FAULT_S, *_op(text)) for text in undos]
    return Schedule(0, CALM_S + FAULT_S, t.hosts, (name,), steps)


def _op(text: str) -> tuple[str, tuple[str, ...]]:
    kind, *args = text.split(":")
    return kind, tuple(args)


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        yield client


ALL_SCENARIOS = [*SCENARIOS, "loss-and-jitter-everywhere"]


@pytest.mark.parametrize("name", ALL_SCENARIOS)
def test_a_network_fault_breaks_no_verdict(name: str, cluster: LocalCluster, nemesis: Nemesis, admin: Admin,
                                           tmp_path) -> None:
    if name == "loss-and-jitter-everywhere" and not (nemesis.netem_supported() or link_queue_supported()):
        pytest.skip("jitter needs sch_netem or NetfilterQueue and iptables (see services.devcluster.nemesis)")
    topic = f"net-{name}"
    chosen: list[Schedule] = []

    def run_scenario(cluster: LocalCluster, _schedule: object, stop_event, on_record=None):
        schedule = scenario_schedule(name, targets(cluster, admin, topic))
        chosen.append(schedule)
        print(f"\nschedule {schedule}")
        return run_schedule(nemesis, schedule, stop_event, on_record=on_record)

    started = time.monotonic()
    result = run_with_faults(cluster, name, run_scenario, WorkloadConfig(topic=topic),
                             history_path=tmp_path / "history.jsonl")
    result.label = name
    print(f"{result.describe()}\n{result.table_header()}\n{result.table_row()}   "
          f"({time.monotonic() - started:.0f} s)")
    failed = [str(record) for record in nemesis.records if not record.ok]
    nemesis.records.clear()
    assert chosen and not failed, failed
    assert not result.errors, result.errors
    assert result.faults == len([s for s in chosen[0].steps if s.at_s == CALM_S])
    assert result.acknowledged > 0 and result.recovery_s is not None
    assert result.violations == 0, f"{chosen[0]}\n{result.describe()}"


def test_a_broker_stopped_past_its_session_while_it_starts_serves_once_resumed(
        cluster: LocalCluster, nemesis: Nemesis) -> None:
    # replays `kill:broker-3; start; pause:broker-3` during its first ZooKeeper calls, held past its
    # session (found by the process-fault schedules: the broker died of kazoo's ConnectionLoss in
    # `ensure_paths`); a delay on its link makes those calls last seconds, so the pause lands in them
    broker = cluster.broker_names[-1]
    cluster.kill_service(broker)  # not the nemesis's kill: it would start the broker again itself
    log_path = cluster.log_path(broker)
    seen = log_path.stat().st_size if log_path.exists() else 0
    nemesis.apply(f"link:{broker}:delay_ms={START_UP_DELAY_MS}")
    try:
        cluster.start_service(broker, wait=False)
        wait_until(lambda: "Zookeeper connection established" in log_path.read_text()[seen:], 30, 0.01,
                   message=f"{broker} to connect to ZooKeeper")
        hold_s = 2 * BROKER_SESSION_TIMEOUT_MS / 1000  # past its session
        schedule = Schedule(0, hold_s, tuple(cluster.network.hosts), ("pause",),
                            [Step(0.0, "pause", (broker,)), Step(hold_s, "resume", (broker,))])
        print(f"\nschedule {schedule}")
        records = run_schedule(nemesis, schedule)
        assert all(record.ok for record in records), [str(record) for record in records]
        resumed_at = next(record.started_at for record in records if record.op.kind == "resume")
    finally:
        nemesis.apply(f"unlink:{broker}")
    cluster.wait_serving(broker, timeout_s=60)
    pid = cluster.running_pid(broker)
    assert pid is not None and process_state(pid) != "Z"
    lines = [json.loads(line) for line in log_path.read_text()[seen:].splitlines() if line.startswith("{")]
    registered = [datetime.fromisoformat(line["ts"]).timestamp() for line in lines
                  if line["message"].startswith("registered broker")]
    assert registered and registered[0] >= resumed_at - 0.01, "the pause did not land in its start-up"
    assert not [line for line in lines if "ConnectionLoss" in json.dumps(line)]
