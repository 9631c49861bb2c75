"""Planning and claiming a rebalance against an in-memory stand-in for the ZooKeeper layer."""

from services.clients.zk_consumer.rebalance import RebalanceWatches, claim_ownership, plan_assignment
from services.clients.zk_consumer.topic_count import ConsumerThreadId, StaticTopicCount, Whitelist, WildcardTopicCount
from services.common.topic_partition import TopicPartition
from services.common.zk.consumers import ConsumerRegistration
from tests.unit.clients.zk_consumer.fake_zk import FakeZk

WATCHES = RebalanceWatches(members=lambda e: None, topic_data=lambda e: None, topic_list=lambda e: None)


def test_the_plan_takes_this_members_range_and_watches_what_it_read():
    zk = FakeZk({"t": 6, "u": 1}, {"g_a": ConsumerRegistration({"t": 2}), "g_b": ConsumerRegistration({"t": 3})})
    plan = plan_assignment(zk, "g", StaticTopicCount("g_b", {"t": 3}), WATCHES)
    assert {tp.partition: str(t) for tp, t in plan.mine.items()} == {3: "g_b-0", 4: "g_b-1", 5: "g_b-2"}
    assert plan.partition_counts == {"t": 6}
    assert zk.watched == ["topics", "members", "t"]


def test_a_member_not_yet_registered_still_counts_itself_and_wildcards_share_topics():
    zk = FakeZk({"t1": 2, "t2": 1, "x": 4}, {"g_a": ConsumerRegistration({"t.*": 1}, "white_list")})
    own = WildcardTopicCount("g_b", Whitelist("t.*"), 1)
    plan = plan_assignment(zk, "g", own, WATCHES)
    assert sorted((tp.topic, tp.partition) for tp in plan.mine) == [("t1", 1)]


def test_a_conflicting_claim_releases_what_was_claimed():
    zk = FakeZk({}, {})
    zk.owners[TopicPartition("t", 1)] = "g_other-0"
    mine = {TopicPartition("t", p): ConsumerThreadId("g_a", 0) for p in range(3)}
    assert not claim_ownership(zk, "g", mine)
    assert zk.owners == {TopicPartition("t", 1): "g_other-0"}
    del zk.owners[TopicPartition("t", 1)]
    assert claim_ownership(zk, "g", mine)
    assert set(zk.owners.values()) == {"g_a-0"}
