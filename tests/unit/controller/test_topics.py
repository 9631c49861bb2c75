"""Topic names (Kafka's Topic.validate, collisions, internal topics) and topic config checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.common.errors import Errors, KafkaError
from services.common.topic_names import INTERNAL_TOPICS, validate_topic_name
from services.controller.state.topics import (
    colliding_topics,
    has_collision,
    has_collision_chars,
    is_internal,
    validate_new_topic_name,
    validate_topic_configs,
)

LEGAL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


@pytest.mark.parametrize(
    "name", ["a", "valid", "TOPIC", "with.dots", "with_underscore", "with-dash", "0", "a" * 249, "..."]
)
def test_valid_names(name):
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        (".", 'Topic name cannot be "." or ".."'),
        ("..", 'Topic name cannot be "." or ".."'),
        (
            "a" * 250,
            "Topic name is illegal, it can't be longer than 249 characters, topic name: " + "a" * 250,
        ),
        ("with space", "contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
        ("slash/", "contains a character other than"),
        ("ümlaut", "contains a character other than"),
        ("tab\t", "contains a character other than"),
        ("star*", "contains a character other than"),
    ],
)
def test_invalid_names(name, message):
    with pytest.raises(KafkaError) as raised:
        validate_topic_name(name)
    assert raised.value.code == Errors.INVALID_TOPIC_EXCEPTION
    assert message in raised.value.args[0]


@given(st.text(alphabet=LEGAL, min_size=1, max_size=249).filter(lambda s: s not in (".", "..")))
def test_any_legal_name_passes(name):
    validate_topic_name(name)


@given(st.text(min_size=1, max_size=40).filter(lambda s: any(c not in LEGAL for c in s)))
def test_any_illegal_character_fails(name):
    with pytest.raises(KafkaError):
        validate_topic_name(name)


def test_internal_topics():
    assert INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state"}
    assert is_internal("__consumer_offsets") and is_internal("__transaction_state")
    assert not is_internal("consumer_offsets")


def test_collisions():
    assert has_collision_chars("a.b") and has_collision_chars("a_b") and not has_collision_chars("a-b")
    assert has_collision("a.b", "a_b") and has_collision("a_b", "a.b") and has_collision("a.b", "a.b")
    assert not has_collision("a.b", "a-b")
    assert colliding_topics("a.b_c", ["a_b.c", "a_b_c", "abc", "a.b_c"]) == ["a_b.c", "a_b_c"]


def test_new_topic_name_checks():
    validate_new_topic_name("fresh", ["other"])
    with pytest.raises(KafkaError) as raised:
        validate_new_topic_name("taken", ["taken"])
    assert raised.value.code == Errors.TOPIC_ALREADY_EXISTS
    assert raised.value.args[0] == "Topic 'taken' already exists."
    with pytest.raises(KafkaError) as raised:
        validate_new_topic_name("metrics.a", ["metrics_a", "x"])
    assert raised.value.code == Errors.INVALID_TOPIC_EXCEPTION
    assert raised.value.args[0] == "Topic 'metrics.a' collides with existing topics: metrics_a"
    with pytest.raises(KafkaError) as raised:
        validate_new_topic_name("bad name", [])
    assert raised.value.code == Errors.INVALID_TOPIC_EXCEPTION


# --- topic configs ----------------------------------------------------------------------------


def test_valid_configs_pass_as_strings():
    configs = {
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "TRUE",
        "compression.type": "zstd",
        "min.cleanable.dirty.ratio": "0.5",
        "message.timestamp.type": "LogAppendTime",
        "message.format.version": "2.8-IV1",
        "leader.replication.throttled.replicas": "0:1, 1:2",
        "follower.replication.throttled.replicas": "*",
    }
    assert validate_topic_configs(configs) == configs


@pytest.mark.parametrize(
    ("configs", "error", "fragment"),
    [
        ({"no.such.config": "1"}, "INVALID_CONFIG", "Unknown topic config name: no.such.config"),
        ({"retention.ms": "soon"}, "INVALID_CONFIG", "retention.ms"),
        ({"retention.ms": "-2"}, "INVALID_CONFIG", "at least -1"),
        ({"segment.bytes": "13"}, "INVALID_CONFIG", "at least 14"),
        ({"cleanup.policy": "shred"}, "INVALID_CONFIG", "cleanup.policy"),
        ({"compression.type": "brotli"}, "INVALID_CONFIG", "compression.type"),
        ({"min.insync.replicas": "0"}, "INVALID_CONFIG", "min.insync.replicas"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "INVALID_CONFIG", "between 0 and 1"),
        ({"unclean.leader.election.enable": "yes"}, "INVALID_CONFIG", "true or false"),
        ({"leader.replication.throttled.replicas": "*,0:1"}, "INVALID_CONFIG", "partitionId"),
        ({"message.format.version": "latest"}, "INVALID_CONFIG", "Kafka version"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "INVALID_CONFIG",
            "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
        (
            {"retention.ms": None, "segment.ms": None},
            "INVALID_REQUEST",
            "Null value not supported for topic configs : retention.ms,segment.ms",
        ),
    ],
)
def test_invalid_configs(configs, error, fragment):
    with pytest.raises(KafkaError) as raised:
        validate_topic_configs(configs)
    assert raised.value.error_name == error
    assert fragment in raised.value.args[0]
