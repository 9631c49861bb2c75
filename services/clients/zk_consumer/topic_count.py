"""What a 0.8 ZooKeeper consumer subscribes to, as Kafka 0.8's TopicCount and TopicFilter: the
member's consumer id, its consumer thread ids per topic, and the subscription it registers.

- `consumer_id_string(group, configured_id)` is `<group>_<consumer.id>`, or without one
  `<group>_<hostname>-<time ms>-<first 8 hex digits of a random UUID>`.
- `ConsumerThreadId(consumer_id, n)` names the stream a partition is given to; it prints as
  `<consumer id>-<n>` (the value of an owner znode) and sorts by consumer id, then number.
- `StaticTopicCount` ({topic: streams}, pattern `static`) and `WildcardTopicCount` (a `Whitelist`
  or `Blacklist` regex with a number of streams, pattern `white_list`/`black_list`) give each
  topic's thread ids; a wildcard count covers every existing topic its filter allows.
- `topic_count_from_registration` reads another member's registration back into a TopicCount,
  which is how a member learns the thread ids of the whole group.

Filters are Kafka's: the regex is trimmed, commas become `|`, spaces and surrounding quotes are
dropped; a topic is allowed when the whole name matches (Whitelist) or does not (Blacklist), and
internal topics are left out while `exclude.internal.topics` is true.
"""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from services.common.topic_names import INTERNAL_TOPICS
from services.common.zk.consumers import (
    BLACK_LIST_PATTERN,
    STATIC_PATTERN,
    WHITE_LIST_PATTERN,
    ConsumerRegistration,
)


def consumer_id_string(group: str, configured_id: str | None = None, *, hostname: str | None = None,
                       now_ms: int | None = None, random_hex: str | None = None) -> str:
    if configured_id:
        return f"{group}_{configured_id}"
    host = hostname if hostname is not None else socket.gethostname()
    stamp = now_ms if now_ms is not None else int(time.time() * 1000)
    suffix = (random_hex if random_hex is not None else uuid.uuid4().hex)[:8]
    return f"{group}_{host}-{stamp}-{suffix}"


class ConsumerThreadId(NamedTuple):
    consumer_id: str
    thread_number: int

    def __str__(self) -> str:
        return f"{self.consumer_id}-{self.thread_number}"


def thread_ids(consumer_id: str, streams: int) -> list[ConsumerThreadId]:
    if streams < 1:
        raise ValueError(f"a topic needs at least one stream, not {streams}")
    return [ConsumerThreadId(consumer_id, n) for n in range(streams)]


# ------------------------------------------------------------------------------------ topic filters

def _clean_regex(raw: str) -> str:
    text = raw.strip().replace(",", "|").replace(" ", "")
    return re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", text))


@dataclass(frozen=True)
class TopicFilter:
    raw_regex: str
    pattern_name = ""

    def __post_init__(self) -> None:
        try:
            re.compile(self.regex)
        except re.error as exc:
            raise ValueError(f"{self.raw_regex!r} is an invalid topic filter: {exc}") from None

    @property
    def regex(self) -> str:
        return _clean_regex(self.raw_regex)

    def _matches(self, topic: str) -> bool:
        return re.fullmatch(self.regex, topic) is not None

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        raise NotImplementedError


class Whitelist(TopicFilter):
    pattern_name = WHITE_LIST_PATTERN

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        internal_excluded = exclude_internal_topics and topic in INTERNAL_TOPICS
        return self._matches(topic) and not internal_excluded


class Blacklist(TopicFilter):
    pattern_name = BLACK_LIST_PATTERN

    def is_topic_allowed(self, topic: str, exclude_internal_topics: bool = True) -> bool:
        internal_excluded = exclude_internal_topics and topic in INTERNAL_TOPICS
        return not self._matches(topic) and not internal_excluded


# ------------------------------------------------------------------------------------ topic counts

@dataclass(frozen=True)
class StaticTopicCount:
    consumer_id: str
    streams_per_topic: dict[str, int]

    pattern = STATIC_PATTERN

    def __post_init__(self) -> None:
        for n in self.streams_per_topic.values():
            thread_ids(self.consumer_id, n)

    def thread_ids_per_topic(self, all_topics: Iterable[str] = ()) -> dict[str, list[ConsumerThreadId]]:
        return {t: thread_ids(self.consumer_id, n) for t, n in self.streams_per_topic.items()}

    def subscription(self) -> dict[str, int]:
        return dict(self.streams_per_topic)


@dataclass(frozen=True)
class WildcardTopicCount:
    consumer_id: str
    topic_filter: TopicFilter
    streams: int
    exclude_internal_topics: bool = True

    def __post_init__(self) -> None:
        thread_ids(self.consumer_id, self.streams)

    @property
    def pattern(self) -> str:
        return self.topic_filter.pattern_name

    def thread_ids_per_topic(self, all_topics: Iterable[str] = ()) -> dict[str, list[ConsumerThreadId]]:
        allowed = sorted(t for t in all_topics
                         if self.topic_filter.is_topic_allowed(t, self.exclude_internal_topics))
        return {t: thread_ids(self.consumer_id, self.streams) for t in allowed}

    def subscription(self) -> dict[str, int]:
        return {self.topic_filter.raw_regex: self.streams}


TopicCount = StaticTopicCount | WildcardTopicCount
_FILTERS = {WHITE_LIST_PATTERN: Whitelist, BLACK_LIST_PATTERN: Blacklist}


def topic_count_from_registration(consumer_id: str, registration: ConsumerRegistration,
                                  exclude_internal_topics: bool = True) -> TopicCount:
    """Another member's TopicCount, from its `/consumers/<group>/ids/<id>` registration."""
    if registration.pattern == STATIC_PATTERN:
        return StaticTopicCount(consumer_id, dict(registration.subscription))
    filter_class = _FILTERS.get(registration.pattern)
    if filter_class is None or len(registration.subscription) != 1:
        raise ValueError(f"consumer {consumer_id} registered an unknown subscription {registration}")
    (regex, streams), = registration.subscription.items()
    return WildcardTopicCount(consumer_id, filter_class(regex), streams, exclude_internal_topics)
