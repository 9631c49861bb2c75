"""A cluster whose ZooKeeper and services each run on a host of their own (a network namespace on a
bridge of the run), driven from the root namespace, and the nemesis's faults on it: an isolated
leader loses its leadership and rejoins the ISR after heal, one-way drops and link faults are
applied and removed, processes are paused, killed and restarted, a clock is skewed. Every
namespace, veth and bridge of the run is gone afterwards, whatever happened."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.clients.admin import Admin
from services.clients.cli import main as cli_main
from services.clients.lowlevel import LowLevelClient
from services.common.records import build_batch
from services.common.records.reader import iter_records
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import ZOOKEEPER_HOST, LocalCluster
from services.devcluster.nemesis import (
    CLIENT,
    LINK_CHAIN,
    LINK_QUEUE_INSTALL,
    NEMESIS_TABLE,
    Nemesis,
    Schedule,
    link_queue_supported,
    run_schedule,
)
from services.devcluster.netns import HostNetwork, NetworkError, run_links, run_namespaces, unsupported_reason
from services.devcluster.proc import process_state, wait_until
from services.devcluster.zookeeper import running_pid as zookeeper_pid
from tests.integration.conftest import (
    CLIENT_CONFIG,
    TEARDOWN_STOP_TIMEOUT_S,
    TEST_BROKER_CONFIG,
    TEST_CONTROLLER_CONFIG,
    TEST_COORDINATOR_CONFIG,
    create_topic,
    zk_session,
)
from tests.netns_support import host_network, hosts_skip_reason

pytestmark = pytest.mark.timeout(120)

BROKERS, CONTROLLERS, COORDINATORS = 3, 1, 1
FAILOVER_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def network() -> Iterator[HostNetwork]:
    with host_network(CONTROLLERS, BROKERS, COORDINATORS, "this test") as network:
        yield network


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, network: HostNetwork, tmp_path_factory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("netns-cluster"), brokers=BROKERS, controllers=CONTROLLERS,
                           coordinators=COORDINATORS, network=network, broker_config=TEST_BROKER_CONFIG,
                           controller_config=TEST_CONTROLLER_CONFIG, coordinator_config=TEST_COORDINATOR_CONFIG)
    failures_before = request.session.testsfailed
    try:
        cluster.start()
        yield cluster
    finally:
        if request.session.testsfailed > failures_before:
            print(f"\n===== service logs of {cluster.base_dir} =====\n{cluster.dump_logs()}")
        for name in cluster.all_names:  # nothing checks a clean shutdown here: SIGKILL, by pid
            if cluster.running_pid(name) is not None:
                cluster.kill_service(name)
        cluster.stop(timeout_s=TEARDOWN_STOP_TIMEOUT_S)  # ZooKeeper


@pytest.fixture(scope="module")
def nemesis(cluster: LocalCluster) -> Iterator[Nemesis]:
    nemesis = Nemesis(cluster)
    yield nemesis
    nemesis.heal_all()


@pytest.fixture(scope="module")
def admin(cluster: LocalCluster) -> Iterator[Admin]:
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as client:
        yield client


def partition_state(cluster: LocalCluster, topic: str, partition: int = 0):
    with zk_session(cluster.zookeeper_connect) as zk:
        found = zk.get_partition_state(TopicPartition(topic, partition))
    return None if found is None else found.value


def leader_seen_by(endpoint: str, topic: str) -> int:
    """The leader of partition 0 as the broker at `endpoint` answers metadata."""
    with LowLevelClient(bootstrap_servers=endpoint, **CLIENT_CONFIG) as client:
        return next(p.leader for p in client.partitions_for(topic) if p.partition == 0)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> int:
    with LowLevelClient(bootstrap_servers=bootstrap, **CLIENT_CONFIG) as client:
        result = client.produce(topic, 0, build_batch(values), acks=-1, timeout_ms=10000,
                                retry_timeout_ms=FAILOVER_TIMEOUT_S * 1000)
    assert result.error_code == 0, result
    return result.base_offset


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    with LowLevelClient(bootstrap_servers=bootstrap, **CLIENT_CONFIG) as client:
        result = client.fetch(topic, 0, 0)
    assert result.error_code == 0, result
    return [record.value for record in iter_records(result.records)]


def can_connect(network: HostNetwork, source: str, address: str, port: int) -> bool:
    """Whether a TCP connection from `source`'s namespace (or the root's, for CLIENT) to
    address:port is accepted within PROBE_TIMEOUT_S."""
    code = f"import socket; socket.create_connection(({address!r}, {port}), {PROBE_TIMEOUT_S}).close()"
    prefix = [] if source == CLIENT else network.exec_prefix(source)
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                          timeout=30).returncode == 0


def test_services_bind_their_own_hosts_and_serve_the_root_namespace(cluster: LocalCluster, network: HostNetwork,
                                                                   admin: Admin) -> None:
    for name in cluster.all_names:
        assert cluster.endpoint(name).startswith(network.address(name) + ":"), name
        config = cluster.config_path(name).read_text()
        assert f"PLAINTEXT://{network.address(name)}:" in config
        assert f"zookeeper.connect={network.address(ZOOKEEPER_HOST)}:" in config
    assert network.run_in("broker-1", ["ip", "-o", "-4", "addr", "show", "dev", "eth0"]).count(
        network.address("broker-1") + "/24") == 1
    create_topic(admin, "hosts", 1, 3, configs={"min.insync.replicas": "2"})
    produce(cluster.bootstrap_servers, "hosts", [b"a", b"b", b"c"])
    assert read_values(cluster.bootstrap_servers, "hosts") == [b"a", b"b", b"c"]


def test_isolated_leader_loses_leadership_and_rejoins_the_isr_after_heal(
        cluster: LocalCluster, nemesis: Nemesis, admin: Admin) -> None:
    topic = create_topic(admin, "isolated", 1, 3, configs={"min.insync.replicas": "2"})
    produce(cluster.bootstrap_servers, topic, [b"before"])
    leader = partition_state(cluster, topic).leader
    leader_name = cluster.broker_name(leader)
    others = ",".join(cluster.endpoint(name) for name in cluster.broker_names if name != leader_name)

    record = nemesis.apply(f"isolate:{leader_name}")
    assert record.ok and "nft drops" in record.detail
    assert not can_connect(cluster.network, CLIENT, *cluster.endpoint(leader_name).split(":"))
    state = wait_until(lambda: (s := partition_state(cluster, topic)) and s.leader not in (-1, leader) and s,
                       FAILOVER_TIMEOUT_S, 0.2, message=f"leadership of {topic}-0 to leave broker {leader}")
    assert leader not in state.isr
    for endpoint in others.split(","):  # the brokers' metadata follows ZooKeeper's state a little later
        wait_until(lambda endpoint=endpoint: leader_seen_by(endpoint, topic) not in (-1, leader), FAILOVER_TIMEOUT_S,
                   0.2, message=f"{endpoint} to tell a leader of {topic}-0 other than broker {leader}")
    produce(others, topic, [b"during"])

    nemesis.apply("heal")
    assert NEMESIS_TABLE not in cluster.network.run_in(leader_name, ["nft", "list", "tables"])
    wait_until(lambda: leader in partition_state(cluster, topic).isr, FAILOVER_TIMEOUT_S, 0.2,
               message=f"broker {leader} back in the ISR of {topic}-0")
    produce(cluster.bootstrap_servers, topic, [b"after"])
    assert read_values(cluster.bootstrap_servers, topic) == [b"before", b"during", b"after"]


def test_one_way_drop_and_link_faults_are_applied_and_removed(cluster: LocalCluster, nemesis: Nemesis) -> None:
    network = cluster.network
    target_port = cluster.services["broker-2"].port
    assert can_connect(network, "broker-1", network.address("broker-2"), target_port)

    record = nemesis.apply("drop:broker-1:broker-2")
    assert record.ok, record
    rules = network.run_in("broker-2", ["nft", "list", "table", "inet", NEMESIS_TABLE])
    assert f"ip saddr {network.address('broker-1')} drop" in rules
    assert NEMESIS_TABLE not in network.run_in("broker-1", ["nft", "list", "tables"])  # B -> A untouched
    assert not can_connect(network, "broker-1", network.address("broker-2"), target_port)
    assert can_connect(network, "broker-3", network.address("broker-2"), target_port)
    nemesis.apply("heal")
    assert can_connect(network, "broker-1", network.address("broker-2"), target_port)

    if not (nemesis.netem_supported() or link_queue_supported()):
        pytest.skip(f"no sch_netem in this kernel, and no {LINK_QUEUE_INSTALL} for link faults in user space")
    refused_ms = refusal_ms(network, "broker-3", network.address("broker-1"))
    record = nemesis.apply("link:broker-3:delay_ms=150,jitter_ms=10,reorder=0")
    assert record.ok, record
    if nemesis.netem_supported():
        assert "delay 150ms" in network.run_in("broker-3", ["tc", "qdisc", "show", "dev", "eth0"])
    else:
        assert "NFQUEUE" in network.run_in("broker-3", ["iptables", "-S", LINK_CHAIN]) and "linkqueue" in record.detail
    delayed_ms = refusal_ms(network, "broker-3", network.address("broker-1"))
    assert delayed_ms >= 140, (refused_ms, delayed_ms)
    nemesis.apply("unlink:broker-3")
    assert "netem" not in network.run_in("broker-3", ["tc", "qdisc", "show", "dev", "eth0"])
    assert LINK_CHAIN not in network.run_in("broker-3", ["iptables", "-S"])
    assert refusal_ms(network, "broker-3", network.address("broker-1")) < 140

    record = nemesis.apply("link:broker-3:loss=100")
    assert record.ok, record
    assert not can_connect(network, "broker-3", network.address("broker-2"), target_port)
    nemesis.apply("unlink:broker-3")
    assert can_connect(network, "broker-3", network.address("broker-2"), target_port)
    print(f"connection refused after {refused_ms:.1f} ms, {delayed_ms:.1f} ms with delay_ms=150")


def refusal_ms(network: HostNetwork, source: str, address: str) -> float:
    """How long a TCP connection from `source` to a closed port of `address` takes to be refused:
    one round trip."""
    code = ("import socket, time\nstarted = time.monotonic()\ntry:\n"
            f"    socket.create_connection(({address!r}, 1), 5)\nexcept ConnectionRefusedError:\n"
            "    print((time.monotonic() - started) * 1000)\n")
    out = subprocess.run([*network.exec_prefix(source), sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return float(out)


def test_pause_kill_restart_and_clock_skew(cluster: LocalCluster, nemesis: Nemesis) -> None:
    pid = cluster.running_pid("coordinator-2001")
    nemesis.apply("pause:coordinator-2001")
    assert process_state(pid) == "T"
    nemesis.apply("resume:coordinator-2001")
    assert process_state(pid) != "T"

    zookeeper = zookeeper_pid(cluster.base_dir / "zookeeper")
    nemesis.apply("pause:zookeeper")
    assert process_state(zookeeper) == "T"
    nemesis.apply("resume:zookeeper")
    assert process_state(zookeeper) != "T"

    nemesis.apply("skew:controller-1001:+120s")
    skewed = cluster.running_pid("controller-1001")
    assert b"FAKETIME=+120s" in Path(f"/proc/{skewed}/environ").read_bytes()
    nemesis.apply("kill:coordinator-2001")
    assert cluster.running_pid("coordinator-2001") is None
    healed = nemesis.heal_all()
    assert [str(record.op) for record in healed] == ["heal", "restart:coordinator-2001", "unskew:controller-1001"]
    assert all(record.ok for record in healed), healed
    assert cluster.is_serving("coordinator-2001")
    assert b"FAKETIME" not in Path(f"/proc/{cluster.running_pid('controller-1001')}/environ").read_bytes()


def test_a_schedule_line_replays_and_the_runner_heals_at_the_end(cluster: LocalCluster) -> None:
    hosts = cluster.network.hosts
    schedule = Schedule.generate(5, hosts, 3.0, kinds=("drop", "split", "isolate"), hold_s=(0.5, 1.0),
                                 gap_s=(0.2, 0.5))
    line = str(schedule)
    assert Schedule.parse(line) == schedule == Schedule.generate(5, hosts, 3.0, kinds=("drop", "split", "isolate"),
                                                                 hold_s=(0.5, 1.0), gap_s=(0.2, 0.5))
    truncated = Schedule.parse(line)
    truncated.steps = [step for step in truncated.steps if step.op != "heal"]  # the runner must heal anyway
    records = run_schedule(cluster, truncated)
    assert [str(r.op) for r in records][:len(truncated.steps)] == [str(s.as_op) for s in truncated.steps]
    assert str(records[-1].op) == "heal" and records[-1].ok
    for host in hosts:
        assert NEMESIS_TABLE not in cluster.network.run_in(host, ["nft", "list", "tables"])


def test_the_network_is_removed_when_the_block_using_it_fails() -> None:
    if (reason := unsupported_reason()) is not None:
        pytest.skip(f"cannot make network namespaces here: {reason}")
    network = HostNetwork(["a", "b"])
    with pytest.raises(RuntimeError, match="failing on purpose"), network:
        assert len(run_namespaces(network.run_id)) == 2
        raise RuntimeError("failing on purpose")
    assert run_namespaces(network.run_id) == [] and run_links(network.run_id) == []
    with pytest.raises(NetworkError):
        network.run_in("a", ["true"])




def test_dev_up_hosts_serves_from_namespaces_and_dev_down_removes_them(tmp_path: Path, capsys) -> None:
    if (reason := hosts_skip_reason("odradek dev up --hosts")) is not None:
        pytest.skip(reason)
    base = tmp_path / "var"
    try:
        assert cli_main(["dev", "up", "--hosts", "--dir", str(base), "--controllers", "1", "--brokers", "1",
                         "--coordinators", "1", "--gateways", "0", "--no-demo-topic"]) == 0, capsys.readouterr().out
        cluster = LocalCluster.load(base)
        run_id = cluster.network.run_id
        assert len(run_namespaces(run_id)) == 4  # zookeeper, controller, broker, coordinator
        printed = capsys.readouterr().out
        assert f"Bootstrap servers: {cluster.endpoint('broker-1')}" in printed
        assert cli_main(["dev", "add-broker", "--dir", str(base)]) == 0, capsys.readouterr().out
        grown = LocalCluster.load(base)
        assert grown.endpoint("broker-2").startswith(grown.network.address("broker-2") + ":")
        assert len(run_namespaces(run_id)) == 5
        assert cli_main(["dev", "status", "--dir", str(base)]) == 0
        assert cli_main(["dev", "down", "--dir", str(base)]) == 0
        assert f"Removed network run {run_id}" in capsys.readouterr().out
        assert run_namespaces(run_id) == [] and run_links(run_id) == []
    finally:
        if (base / "cluster.json").is_file():
            left = LocalCluster.load(base)
            left.stop(timeout_s=TEARDOWN_STOP_TIMEOUT_S)
            if left.network is not None:
                left.network.teardown()
