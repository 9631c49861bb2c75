"""ControllerEventProcessor over in-memory ZooKeeper fakes and the real core: election and
failover, standby answers, resignation when fenced, the retry after a version conflict, and
topic administration."""

from __future__ import annotations

import pytest

from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.common.zk import ControllerInfo
from services.controller.admin_events import AUTO_REBALANCE_KEY
from services.controller.processor import REELECT_KEY, ControllerEventProcessor
from services.controller.state.config import ControllerConfig
from services.controller.state.core import ControllerCore
from services.controller.state.effects import SendLeaderAndIsr, SendUpdateMetadata
from services.controller.state.events import (
    ApiPartitionReassignment,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    CreatePartitions,
    CreateTopics,
    DeleteTopics,
    Expire,
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
    Startup,
    ZkPartitionReassignment,
)
from services.controller.state.topic_admin import NewPartitions, NewTopic, TopicCreation
from tests.unit.controller.service.fakes import (
    SESSION_ID,
    FakeChannels,
    FakeReader,
    FakeScheduler,
    FakeZooKeeper,
    broker,
)

CONTROLLER_ID = 1001
T0 = TopicPartition("t", 0)


class Answers(list):
    def __call__(self, result):
        self.append(result)


@pytest.fixture
def zk() -> FakeZooKeeper:
    zk = FakeZooKeeper()
    zk.brokers = {1: broker(1), 2: broker(2)}
    zk.add_topic("t", {0: (1, 2)})
    return zk


@pytest.fixture
def channels() -> FakeChannels:
    return FakeChannels()


@pytest.fixture
def scheduler() -> FakeScheduler:
    return FakeScheduler()


@pytest.fixture
def processor(zk, channels, scheduler) -> ControllerEventProcessor:
    config = ControllerConfig(leader_imbalance_check_interval_seconds=2)
    return ControllerEventProcessor(
        controller_id=CONTROLLER_ID,
        endpoint="127.0.0.1:9093",
        cluster_id="cluster",
        config=config,
        core=ControllerCore(config, CONTROLLER_ID),
        zk=zk,
        reader=FakeReader(zk),
        channels=channels,
        scheduler=scheduler,
        session_id=lambda: SESSION_ID,
    )


def test_the_winner_fails_over_and_brings_new_partitions_online(processor, zk, channels, scheduler):
    processor.process(Startup())

    assert processor.active and processor.view.active
    assert zk.controller.controller_id == CONTROLLER_ID
    assert processor.context.epoch == zk.epoch.epoch == 1
    assert zk.states[TopicPartition("t", 0)].value.leader == 1
    assert channels.broker_ids == {1, 2}
    assert {e.broker_id for e in channels.sent if isinstance(e, SendLeaderAndIsr)} == {1, 2}
    assert {e.broker_id for e in channels.sent if isinstance(e, SendUpdateMetadata)} == {1, 2}
    assert scheduler.scheduled[AUTO_REBALANCE_KEY][0] == 2
    assert processor.view.global_partition_count == 1 and processor.view.active_controller_id == CONTROLLER_ID


def test_the_view_is_rebuilt_only_after_events_that_change_something(processor, zk):
    processor.process(Startup())
    view = processor.view
    processor.process(LeaderAndIsrResponseReceived(1, 0))
    assert processor.view is view
    processor.process(CreateTopics((NewTopic("new", 1, 1),), callback=Answers()))
    assert processor.view is not view and processor.view.global_topic_count == view.global_topic_count + 1


def test_a_standby_answers_not_controller(processor, zk, channels):
    zk.controller = ControllerInfo(2000, 0, "elsewhere:9093")
    zk.controller_owner = SESSION_ID + 1
    processor.process(Startup())
    assert not processor.active and processor.view.active_controller_id == 2000

    answers = Answers()
    processor.process(CreateTopics((NewTopic("x", 1, 1),), callback=answers))
    processor.process(BrokerChange())
    assert isinstance(answers[0], KafkaError) and answers[0].code == Errors.NOT_CONTROLLER
    assert "x" not in zk.topics and channels.sent == []


def test_it_takes_up_again_a_controller_znode_of_its_own_session(processor, zk):
    zk.elect_controller(CONTROLLER_ID, "127.0.0.1:9093")
    processor.process(Startup())
    assert processor.active and processor.context.epoch == zk.epoch.epoch


def test_another_controller_elected_means_resignation(processor, zk, channels):
    processor.process(Startup())
    zk.elect_other(2000)
    processor.process(ControllerChange())
    assert not processor.active and channels.shutdowns == 1
    assert processor.context.all_topics == frozenset()
    assert processor.view.active_controller_id == 2000


def test_expiry_resigns(processor):
    processor.process(Startup())
    processor.process(Expire())
    assert not processor.active and not processor.view.active


def test_a_fenced_write_resigns_answers_not_controller_and_schedules_reelection(processor, zk, scheduler):
    processor.process(Startup())
    zk.elect_other(2000)
    answers = Answers()
    processor.process(ControlledShutdown(2, 102, callback=answers))  # moves nothing: writes t-0's ISR
    assert not processor.active
    assert answers[0].code == Errors.NOT_CONTROLLER
    assert REELECT_KEY in scheduler.scheduled


def test_a_leaders_own_isr_change_is_read_before_a_broker_failure_is_handled(processor, zk, channels):
    processor.process(Startup())
    zk.bump("t", 0, isr=(1, 2))  # the leader rewrote its state znode meanwhile
    version_before = zk.states[TopicPartition("t", 0)].version
    channels.sent.clear()
    del zk.brokers[1]
    processor.process(BrokerChange())

    state = zk.states[TopicPartition("t", 0)]
    writes = [c for c in zk.calls if c == ("set_partition_states", [TopicPartition("t", 0)])]
    assert len(writes) == 1  # the state znode is read first, so the write does not conflict
    assert state.value.leader == 2 and state.value.isr == (2,)
    assert state.version > version_before
    leadership = processor.context.partition_leadership(T0).leader_and_isr
    assert (leadership.leader, leadership.isr, leadership.zk_version) == (2, (2,), state.version)
    announced = [s for e in channels.sent if isinstance(e, SendLeaderAndIsr) for s in e.partition_states]
    assert announced and all(s.zk_version == state.version for s in announced)


def test_create_topics_validates_writes_and_elects_at_once(processor, zk):
    processor.process(Startup())
    answers = Answers()
    topics = (NewTopic("new", 2, 2), NewTopic("wide", 1, 3), NewTopic("t", 1, 1))
    processor.process(CreateTopics(topics, validate_only=False, callback=answers))

    results = answers[0]
    assert isinstance(results["new"], TopicCreation) and results["new"].num_partitions == 2
    assert results["wide"].code == Errors.INVALID_REPLICATION_FACTOR
    assert results["t"].code == Errors.TOPIC_ALREADY_EXISTS
    assert "new" in zk.topics and zk.topics["new"].topic_id
    assert {TopicPartition("new", 0), TopicPartition("new", 1)} <= set(zk.states)
    assert "new" in processor.context.all_topics


@pytest.mark.parametrize("validate_only", [False, True])
def test_a_topic_whose_assignment_znode_cannot_fit_is_refused_before_anything_is_written(
    processor, zk, validate_only
):
    processor.process(Startup())
    answers = Answers()
    wide = {p: list(range(1000, 1020)) for p in range(9000)}  # replicas of 20 unknown brokers each
    topics = (NewTopic("too-wide", assignments=wide), NewTopic("fine", 1, 1))
    processor.process(CreateTopics(topics, validate_only=validate_only, callback=answers))

    refused = answers[0]["too-wide"]
    assert refused.code == Errors.INVALID_REQUEST and "9000 partitions" in str(refused)
    assert isinstance(answers[0]["fine"], TopicCreation)
    assert "too-wide" not in zk.topics and ("fine" in zk.topics) != validate_only
    assert not [tp for tp in zk.states if tp.topic == "too-wide"]


def test_partitions_beyond_the_request_limit_are_refused_before_anything_is_written(processor, zk):
    processor.process(Startup())
    answers = Answers()
    processor.process(CreatePartitions((NewPartitions("t", 60000),), validate_only=False, callback=answers))

    assert answers[0]["t"].code == Errors.POLICY_VIOLATION
    assert len(zk.topics["t"].partitions) == 1 and len(processor.context.partitions_for_topic("t")) == 1


def test_validate_only_writes_nothing(processor, zk):
    processor.process(Startup())
    answers = Answers()
    processor.process(CreateTopics((NewTopic("new", 1, 1),), validate_only=True, callback=answers))
    assert isinstance(answers[0]["new"], TopicCreation)
    assert "new" not in zk.topics


def test_delete_topics_marks_and_starts_deletion(processor, zk):
    processor.process(Startup())
    answers = Answers()
    processor.process(DeleteTopics(("t", "missing"), callback=answers))
    assert answers[0]["t"] is None
    assert answers[0]["missing"].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert "t" in zk.deletions
    assert processor.context.is_topic_queued_for_deletion("t")


def test_a_controller_znode_of_its_earlier_process_leaves_it_standby_with_no_active_controller(processor, zk):
    zk.controller = ControllerInfo(CONTROLLER_ID, 0, "127.0.0.1:9093")
    zk.controller_owner = SESSION_ID + 1     # the session of a killed process with this id
    processor.process(Startup())
    assert not processor.active and not processor.view.active
    assert processor.view.active_controller_id == -1


def test_reassignments_through_the_api_are_answered_listed_and_written(processor, zk):
    zk.brokers[3] = broker(3)
    processor.process(Startup())
    answers = Answers()
    processor.process(ApiPartitionReassignment({T0: (2, 3), TopicPartition("t", 9): (1,)}, callback=answers))
    (results,) = answers
    assert results[T0] is None
    assert results[TopicPartition("t", 9)].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    written = zk.topics["t"].partitions[0]
    assert (written.replicas, written.adding_replicas, written.removing_replicas) == ((2, 3, 1), (3,), (1,))
    listed = Answers()
    processor.process(ListPartitionReassignments(None, callback=listed))
    assert list(listed[0]) == [T0]


def test_the_legacy_znode_is_carried_out_and_refused_partitions_leave_it(processor, zk):
    zk.brokers[3] = broker(3)
    zk.reassignment = {T0: [2, 3], TopicPartition("gone", 0): [1]}
    processor.process(Startup())
    assert zk.topics["t"].partitions[0].replicas == (2, 3, 1)
    # the refused partition left the znode; the one in progress stays until it completes
    assert zk.reassignment == {T0: [2, 3]}
    calls = len(zk.calls)
    processor.process(ZkPartitionReassignment())  # its own rewrite fires the watch: nothing new
    assert zk.calls[calls:] == []


def test_a_log_dir_event_asks_the_broker_and_its_storage_errors_move_leadership(processor, zk, channels):
    """Kafka's log dir failure handling: the notification makes the controller send LeaderAndIsr
    for every replica of the broker; the partitions it answers KAFKA_STORAGE_ERROR for get a
    leader elsewhere and lose it from their ISR, and the notification is deleted."""
    processor.process(Startup())
    assert zk.states[T0].value.leader == 1
    channels.sent.clear()
    zk.log_dir_events = {"0000000000": 1}
    processor.process(LogDirEventNotification())

    asked = [s.partition for e in channels.sent if isinstance(e, SendLeaderAndIsr) and e.broker_id == 1
             for s in e.partition_states]
    assert asked == [T0]
    assert zk.log_dir_events == {}
    processor.process(LeaderAndIsrResponseReceived(1, Errors.NONE, {T0: Errors.KAFKA_STORAGE_ERROR}))

    state = zk.states[T0].value
    assert (state.leader, state.isr) == (2, (2,))
    assert processor.context.replicas_on_offline_dirs(1) == {T0}
