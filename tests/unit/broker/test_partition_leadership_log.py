"""The line a broker logs when it starts or stops leading a partition, with the leader epoch."""

from __future__ import annotations

import logging

from services.broker.partition import Partition
from services.common.logging_setup import LEADERSHIP_EVENT
from services.common.shared_types import PartitionStateInfo
from services.common.topic_partition import TopicPartition
from tests.unit.broker.log.support import open_log


def state(leader: int, epoch: int) -> PartitionStateInfo:
    return PartitionStateInfo(TopicPartition("t", 0), controller_epoch=1, leader=leader, leader_epoch=epoch,
                              isr=(1, 2), zk_version=epoch, replicas=(1, 2))


def leadership_lines(caplog) -> list[tuple[int, bool, int, str]]:
    return [(r.broker, r.leader, r.leader_epoch, r.getMessage()) for r in caplog.records
            if getattr(r, "event", None) == LEADERSHIP_EVENT]


def test_starting_and_stopping_to_lead_each_log_one_line_with_the_epoch(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="services.broker.partition")
    partition = Partition("t", 0, 1, open_log(tmp_path / "t-0"))
    partition.apply_leader_and_isr(state(leader=2, epoch=0), 0)  # a follower: nothing to say
    partition.apply_leader_and_isr(state(leader=1, epoch=1), 0)
    partition.apply_leader_and_isr(state(leader=1, epoch=2), 0)  # leads on at a new epoch
    partition.apply_leader_and_isr(state(leader=2, epoch=3), 0)
    partition.apply_leader_and_isr(state(leader=1, epoch=4), 0)
    partition.stop_leading()
    partition.stop_leading()  # no longer leading: nothing to say
    assert leadership_lines(caplog) == [
        (1, True, 1, "t-0: leads at leader epoch 1"), (1, True, 2, "t-0: leads at leader epoch 2"),
        (1, False, 2, "t-0: stopped leading at leader epoch 2"), (1, True, 4, "t-0: leads at leader epoch 4"),
        (1, False, 4, "t-0: stopped leading at leader epoch 4")]
