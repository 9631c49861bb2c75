"""The controller's automatic preferred leader rebalance: a broker restarted after its partitions'
leadership moved away leads them again within a few checks, with no election requested."""

from __future__ import annotations

from services.clients.admin import Admin
from services.common.topic_partition import TopicPartition
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, zk_session

CHECK_INTERVAL_S = 1
REBALANCE_TIMEOUT_S = 30


def test_leadership_returns_to_the_preferred_replicas_of_a_restarted_broker(cluster_factory):
    cluster = cluster_factory(
        brokers=2, controllers=1, controller_config={"leader.imbalance.check.interval.seconds": CHECK_INTERVAL_S}
    )
    first, second = (cluster.services[name].node_id for name in cluster.broker_names)
    assignment = {0: [first, second], 1: [second, first], 2: [first, second], 3: [second, first]}
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        topic = create_topic(admin, "preferred", assignment=assignment)
    partitions = [TopicPartition(topic, p) for p in assignment]

    with zk_session(cluster.zookeeper_connect) as zk:

        def leaders() -> dict[int, int]:
            return {tp.partition: zk.get_partition_state(tp).value.leader for tp in partitions}

        def preferred_leaders() -> bool:
            return leaders() == {p: replicas[0] for p, replicas in assignment.items()}

        wait_until(preferred_leaders, REBALANCE_TIMEOUT_S, 0.1, message="the preferred replicas leading at first")
        cluster.stop_service(cluster.broker_names[0])
        wait_until(lambda: set(leaders().values()) == {second}, REBALANCE_TIMEOUT_S, 0.1,
                   message=f"broker {second} leading every partition while {first} is down")

        cluster.start_service(cluster.broker_names[0])
        wait_until(preferred_leaders, REBALANCE_TIMEOUT_S, 0.1,
                   message=f"broker {first} leading its preferred partitions again")
        assert not zk.zk.exists("/admin/preferred_replica_election")
