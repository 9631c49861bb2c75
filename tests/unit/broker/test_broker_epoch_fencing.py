"""Controller requests fenced by broker epoch (KIP-380): one stamped with an epoch older than the
broker's current registration is refused whole with STALE_BROKER_EPOCH and applies nothing; -1, an
absent epoch, the current one and a newer one are applied."""

from __future__ import annotations

import pytest

from services.broker.metadata_cache import MetadataCache
from services.broker.servicer import BrokerServicer
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2

CURRENT_EPOCH = 4096


class RecordingReplicaManager:
    """Records the controller requests the servicer hands on."""

    def __init__(self) -> None:
        self.applied: list[str] = []

    def become_leader_or_follower(self, controller_id, controller_epoch, states):
        self.applied.append("LeaderAndIsr")
        return {}

    def stop_replicas(self, controller_id, controller_epoch, partitions):
        self.applied.append("StopReplica")
        return {}


@pytest.fixture
def servicer():
    epoch = {"current": CURRENT_EPOCH}
    servicer = BrokerServicer(1, RecordingReplicaManager(), MetadataCache(), fetch_max_bytes=1 << 20,
                              broker_epoch=lambda: epoch["current"])
    servicer.epoch = epoch
    return servicer


def state() -> common_pb2.PartitionState:
    return common_pb2.PartitionState(topic_name="t", partition_index=0, controller_epoch=1, leader=1,
                                     leader_epoch=1, isr=[1], replicas=[1])


def requests(**epoch):
    return {
        "LeaderAndIsr": broker_pb2.LeaderAndIsrRequest(controller_id=9, controller_epoch=1,
                                                       partition_states=[state()], **epoch),
        "UpdateMetadata": broker_pb2.UpdateMetadataRequest(controller_id=9, controller_epoch=1,
                                                           partition_states=[state()], cluster_id="c", **epoch),
        "StopReplica": broker_pb2.StopReplicaRequest(controller_id=9, controller_epoch=1, **epoch),
    }


def call(servicer, name, request):
    return getattr(servicer, name)(request, None)


@pytest.mark.parametrize("name", ["LeaderAndIsr", "UpdateMetadata", "StopReplica"])
def test_an_older_broker_epoch_is_refused_and_applies_nothing(servicer, name):
    response = call(servicer, name, requests(broker_epoch=CURRENT_EPOCH - 1)[name])
    assert response.error_code == Errors.STALE_BROKER_EPOCH == 77
    assert str(CURRENT_EPOCH - 1) in response.error_message and str(CURRENT_EPOCH) in response.error_message
    assert servicer.replica_manager.applied == []
    assert servicer.metadata_cache.snapshot().cluster_id != "c"


@pytest.mark.parametrize("epoch", [{}, {"broker_epoch": -1}, {"broker_epoch": CURRENT_EPOCH},
                                   {"broker_epoch": CURRENT_EPOCH + 1}],
                         ids=["absent", "unknown", "current", "newer"])
@pytest.mark.parametrize("name", ["LeaderAndIsr", "UpdateMetadata", "StopReplica"])
def test_unknown_current_and_newer_epochs_are_applied(servicer, name, epoch):
    response = call(servicer, name, requests(**epoch)[name])
    assert response.error_code == Errors.NONE
    if name == "UpdateMetadata":
        assert servicer.metadata_cache.snapshot().cluster_id == "c"
    else:
        assert servicer.replica_manager.applied == [name]


def test_before_registration_every_epoch_is_applied(servicer):
    servicer.epoch["current"] = -1
    response = call(servicer, "LeaderAndIsr", requests(broker_epoch=12)["LeaderAndIsr"])
    assert response.error_code == Errors.NONE and servicer.replica_manager.applied == ["LeaderAndIsr"]


def test_a_restart_fences_the_previous_process_epoch(servicer):
    first = requests(broker_epoch=CURRENT_EPOCH)["LeaderAndIsr"]
    assert call(servicer, "LeaderAndIsr", first).error_code == Errors.NONE
    servicer.epoch["current"] = CURRENT_EPOCH + 100  # registered again: a new czxid
    assert call(servicer, "LeaderAndIsr", first).error_code == Errors.STALE_BROKER_EPOCH
    assert servicer.replica_manager.applied == ["LeaderAndIsr"]
