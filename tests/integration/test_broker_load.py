"""Brokers under many parked requests: 500 consumers long-poll an idle topic while acks=all
produces to another topic keep being acknowledged. Each broker holds about 170 long polls at
once, far more than its gRPC worker threads (set to 8 here), so this holds only because a parked
request holds no thread."""

from __future__ import annotations

from bench.broker_load import LongPollers
from services.clients.admin import Admin
from services.clients.admin_types import NewTopic
from services.clients.lowlevel import LowLevelClient
from services.common.records import build_batch
from services.devcluster.proc import wait_until

IDLE = "idle"
BUSY = "busy"
CONSUMERS = 500
PRODUCES = 200
MAX_WAIT_MS = 2000


def test_acks_all_produces_succeed_while_500_consumers_long_poll(cluster_factory):
    cluster = cluster_factory(brokers=3, controllers=1, broker_config={"grpc.worker.threads": 8})
    with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin, \
            LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
        admin.create_topics([NewTopic(IDLE, 3, 1), NewTopic(BUSY, 3, 3, configs={"min.insync.replicas": "2"})])
        admin.wait_for_topic(IDLE, 60, partitions=3)
        admin.wait_for_topic(BUSY, 60, partitions=3)
        wait_until(lambda: all(client.produce(BUSY, p, build_batch([b"ready"]), acks=-1).error_code == 0
                               for p in range(3)), 60, 0.2, message="every partition to take acks=all")
        pollers = LongPollers(client, IDLE, CONSUMERS, MAX_WAIT_MS)
        pollers.start()
        try:
            wait_until(lambda: pollers.completed >= CONSUMERS, 60, 0.1,
                       message=lambda: f"every long poll answered once ({pollers.completed} so far)")
            results = [client.produce(BUSY, i % 3, build_batch([b"value-%d" % i]), acks=-1)
                       for i in range(PRODUCES)]
            assert pollers.in_flight == CONSUMERS and not pollers.errors
        finally:
            pollers.stop(MAX_WAIT_MS / 1000 + 30)
        assert [r.error_code for r in results] == [0] * PRODUCES
        assert not pollers.errors
