"""Deleting a topic of thousands of partitions on three brokers: the topic leaves metadata and
ZooKeeper, every broker's log dir loses all its directories (StopReplica renames them `-delete`
and the files go after `file.delete.delay.ms`, 0 in the tests), and a new topic of the same name
is created and used from offset 0."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.records import build_batch, iter_records
from services.common.zk import OdradekZkClient
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import SCALE_CLIENT_CONFIG, zk_session

PARTITIONS = 2000
TOPIC = "wide-doomed"
STEP_TIMEOUT_S = 120


@pytest.fixture
def cluster(cluster_factory) -> LocalCluster:
    return cluster_factory(brokers=3, controllers=1)


@pytest.fixture
def zk(cluster: LocalCluster) -> Iterator[OdradekZkClient]:
    with zk_session(cluster.zookeeper_connect) as client:
        yield client


def topic_dirs(cluster: LocalCluster, topic: str) -> dict[str, list[str]]:
    """Each broker's directories of `topic`, live or renamed for deletion."""
    found = {}
    for name in cluster.broker_names:
        data = cluster.data_dir(name)
        found[name] = sorted(entry for entry in os.listdir(data)
                             if entry.startswith(f"{topic}-") and os.path.isdir(data / entry))
    return found


def leftovers(cluster: LocalCluster, admin: Admin, zk: OdradekZkClient, topic: str) -> dict[str, object]:
    """What is left of a deleted topic anywhere; empty once it is gone."""
    left: dict[str, object] = {}
    if topic in admin.list_topics():
        left["metadata"] = topic
    if topic in zk.get_all_topics():
        left["/brokers/topics"] = topic
    if topic in zk.get_topic_deletions():
        left["/admin/delete_topics"] = topic
    left.update({broker: f"{len(dirs)} dirs, e.g. {dirs[:2]}"
                 for broker, dirs in topic_dirs(cluster, topic).items() if dirs})
    return left


def test_a_topic_of_2000_partitions_is_deleted_everywhere_and_its_name_reused(cluster, zk):
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **SCALE_CLIENT_CONFIG) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
        admin.wait_for_topic(TOPIC, STEP_TIMEOUT_S, partitions=PARTITIONS)
        wait_until(lambda: all(len(dirs) == PARTITIONS for dirs in topic_dirs(cluster, TOPIC).values()),
                   STEP_TIMEOUT_S, 0.5, message="a log directory of every partition on every broker")

        admin.delete_topics([TOPIC])
        wait_until(lambda: not leftovers(cluster, admin, zk, TOPIC), STEP_TIMEOUT_S, 0.5,
                   message=lambda: f"{TOPIC} gone everywhere; left: {leftovers(cluster, admin, zk, TOPIC)}")

        admin.create_topics([NewTopic(TOPIC, 3, 3)])
        admin.wait_for_topic(TOPIC, STEP_TIMEOUT_S, partitions=3)
    wait_until(lambda: all(len(dirs) == 3 for dirs in topic_dirs(cluster, TOPIC).values()), STEP_TIMEOUT_S,
               0.2, message="the new topic's log directories on every broker")
    with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **SCALE_CLIENT_CONFIG) as client:
        for partition in range(3):
            value = f"again-{partition}".encode()
            result = client.produce(TOPIC, partition, build_batch([value]), acks=-1, timeout_ms=30000)
            assert (result.error_code, result.base_offset) == (0, 0)
            fetched = client.fetch(TOPIC, partition, 0, max_wait_ms=0)
            assert fetched.error_code == 0
            assert [r.value for r in iter_records(fetched.records)] == [value]
