"""A seeded schedule of process faults (kill -9 and restart, SIGSTOP and SIGCONT of brokers) under
the fault workload (idempotent acks=all producers, a group reading along, transactions and a
read_committed reader) on one three-broker cluster: every verdict is zero. A broker found dead that
no fault killed is started again and named in the printed result (`crashed`), not a verdict."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.devcluster.faults.process_faults import process_schedule, run_schedule
from services.devcluster.faults.workload import WorkloadConfig, run_with_faults
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import TEST_BROKER_CONFIG, module_cluster

SEED = 32
FAULTS_S = 20.0
# a killed or stopped broker's partitions move once its ZooKeeper session expires: short
BROKER_SESSION_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "process-faults", brokers=3,
                        controllers=1, coordinators=2,
                        broker_config={**TEST_BROKER_CONFIG,
                                       "zookeeper.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS}) as local:
        yield local
        for name in local.all_names:  # nothing is read after the run: no controlled shutdown to wait for
            if local.running_pid(name) is not None:
                local.kill_service(name)


def test_a_seeded_schedule_of_kills_and_pauses_breaks_no_verdict(cluster: LocalCluster, tmp_path):
    schedule = process_schedule(SEED, cluster.broker_names, duration_s=FAULTS_S)
    result = run_with_faults(cluster, schedule, run_schedule, WorkloadConfig(topic="process-faults"),
                             history_path=tmp_path / "history.jsonl")
    result.label = f"seed {SEED}"
    print(f"\nschedule {schedule}\n{result.describe()}\n{result.table_header()}\n{result.table_row()}")
    assert not result.errors, result.errors
    assert 0 < result.faults <= len(schedule) // 2  # a fault due on a broker found dead is not applied
    assert result.acknowledged > 0 and result.recovery_s is not None
    assert result.leadership_events > 0 and result.writes_attributed == result.acknowledged
    assert result.violations == 0, result.describe()
