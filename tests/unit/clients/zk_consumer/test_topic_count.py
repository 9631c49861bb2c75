"""Consumer and thread ids, topic filters, subscriptions and Kafka 0.8's range assignment."""

import pytest

from services.clients.zk_consumer.assignment import group_threads_per_topic, range_assign
from services.clients.zk_consumer.topic_count import (
    Blacklist,
    ConsumerThreadId,
    StaticTopicCount,
    Whitelist,
    WildcardTopicCount,
    consumer_id_string,
    topic_count_from_registration,
)
from services.common.topic_partition import TopicPartition
from services.common.zk.consumers import ConsumerRegistration, decode_consumer, encode_consumer


def test_consumer_id_is_group_host_time_and_uuid_prefix_or_the_configured_id():
    assert consumer_id_string("g", hostname="h1", now_ms=1620000000000,
                              random_hex="0123456789abcdef") == "g_h1-1620000000000-01234567"
    assert consumer_id_string("g", "c7") == "g_c7"
    generated = consumer_id_string("g")
    assert generated.startswith("g_") and len(generated.rsplit("-", 1)[1]) == 8


def test_thread_ids_print_as_consumer_dash_number_and_sort_numerically():
    ids = [ConsumerThreadId("c", 10), ConsumerThreadId("c", 2), ConsumerThreadId("b", 5)]
    assert [str(t) for t in sorted(ids)] == ["b-5", "c-2", "c-10"]


def test_whitelist_and_blacklist_follow_kafka_regex_cleanup_and_internal_topics():
    white = Whitelist(' "clicks, views.*" ')
    assert white.regex == "clicks|views.*"
    assert white.is_topic_allowed("clicks") and white.is_topic_allowed("views-eu")
    assert not white.is_topic_allowed("clicks2")
    assert not Whitelist(".*").is_topic_allowed("__consumer_offsets")
    assert Whitelist(".*").is_topic_allowed("__consumer_offsets", exclude_internal_topics=False)
    black = Blacklist("secret.*")
    assert black.is_topic_allowed("public") and not black.is_topic_allowed("secret-1")
    with pytest.raises(ValueError):
        Whitelist("(")


def test_static_and_wildcard_counts_give_thread_ids_and_registrations():
    static = StaticTopicCount("g_a", {"t": 2})
    assert static.thread_ids_per_topic() == {"t": [ConsumerThreadId("g_a", 0), ConsumerThreadId("g_a", 1)]}
    assert (static.pattern, static.subscription()) == ("static", {"t": 2})
    wildcard = WildcardTopicCount("g_b", Whitelist("t.*"), 3)
    assert list(wildcard.thread_ids_per_topic(["t1", "x", "t2"])) == ["t1", "t2"]
    assert (wildcard.pattern, wildcard.subscription()) == ("white_list", {"t.*": 3})
    with pytest.raises(ValueError):
        StaticTopicCount("g_a", {"t": 0})
    with pytest.raises(ValueError):
        WildcardTopicCount("g_a", Whitelist("t.*"), 0)


def test_registration_json_round_trips_into_a_topic_count():
    reg = ConsumerRegistration({"secret.*": 2}, "black_list", 1620000000000)
    data = encode_consumer(reg)
    assert b'"pattern":"black_list"' in data and b'"timestamp":"1620000000000"' in data
    count = topic_count_from_registration("g_b", decode_consumer(data))
    assert isinstance(count, WildcardTopicCount) and isinstance(count.topic_filter, Blacklist)
    assert count.streams == 2
    assert topic_count_from_registration("g_a", ConsumerRegistration({"t": 1})).subscription() == {"t": 1}
    with pytest.raises(ValueError):
        topic_count_from_registration("g_c", ConsumerRegistration({"a": 1, "b": 1}, "white_list"))


def _threads(consumer, n):
    return [ConsumerThreadId(consumer, i) for i in range(n)]


def test_range_assignment_gives_contiguous_ranges_extra_partitions_first():
    threads = _threads("g_a", 2) + _threads("g_b", 1)
    owners = range_assign({"t": threads}, {"t": [4, 3, 2, 1, 0]})
    assert {tp.partition: str(t) for tp, t in owners.items()} == {
        0: "g_a-0", 1: "g_a-0", 2: "g_a-1", 3: "g_a-1", 4: "g_b-0"}


def test_range_assignment_of_six_partitions_over_two_and_three_streams_covers_each_once():
    counts = [StaticTopicCount("g_x", {"t": 2}), StaticTopicCount("g_y", {"t": 3})]
    owners = range_assign(group_threads_per_topic(counts, []), {"t": range(6)})
    assert sorted(owners) == [TopicPartition("t", p) for p in range(6)]
    assert sorted(str(t) for t in owners.values()) == ["g_x-0", "g_x-0", "g_x-1", "g_y-0", "g_y-1", "g_y-2"]


def test_more_threads_than_partitions_leaves_the_last_threads_idle():
    owners = range_assign({"t": _threads("g_a", 4)}, {"t": [0, 1]})
    assert {str(t) for t in owners.values()} == {"g_a-0", "g_a-1"}
    assert range_assign({"t": _threads("g_a", 2)}, {"t": []}) == {}


def test_wildcard_members_only_share_topics_their_filter_allows():
    counts = [WildcardTopicCount("g_a", Whitelist("t.*"), 1), StaticTopicCount("g_b", {"t1": 1})]
    merged = group_threads_per_topic(counts, ["t1", "t2"])
    assert merged == {"t1": [ConsumerThreadId("g_a", 0), ConsumerThreadId("g_b", 0)],
                      "t2": [ConsumerThreadId("g_a", 0)]}
