"""The console's sampler reading a cluster through a stand-in Admin, and its task stopping."""

from __future__ import annotations

import asyncio

from services.clients.admin_types import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    MemberDescription,
    TopicDescription,
)
from services.clients.cluster import PartitionInfo
from services.clients.consumer.records import OffsetAndMetadata
from services.clients.partition_requests import ListOffsetsResult
from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.gateway.ui.sampler import DESCRIBE_EVERY_SAMPLES, Sampler
from services.gateway.ui.series import SampleRing

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class StandInAdmin:
    def __init__(self) -> None:
        self.ends = {A0: 10, A1: 5, B0: 7}
        self.describes = 0
        self.unanswered: set[TopicPartition] = set()

    def list_topics(self) -> list[str]:
        return ["a", "b"]

    def describe_topics(self, names, raise_errors=True):
        self.describes += 1
        partitions = {"a": (A0, A1), "b": (B0,)}
        return {name: TopicDescription(name, False, tuple(PartitionInfo(tp.topic, tp.partition, 1, 0, (1,), (1,))
                                                          for tp in partitions[name])) for name in names}

    def list_consumer_groups(self):
        return [ConsumerGroupListing("g", False, "Stable")]

    def describe_consumer_groups(self, group_ids):
        member = MemberDescription("m", None, "c", "/h", (A0, A1))
        return {"g": ConsumerGroupDescription("g", False, (member,), "range", "Stable")}

    def list_consumer_group_offsets(self, group_id):
        return {A0: OffsetAndMetadata(4), B0: OffsetAndMetadata(7)}

    def list_offsets(self, specs, raise_errors=True):
        assert set(specs.values()) == {"latest"}
        return {tp: KafkaError("no leader", error=Errors.LEADER_NOT_AVAILABLE) if tp in self.unanswered
                else ListOffsetsResult(self.ends[tp], -1) for tp in specs}


def test_a_sample_sums_end_offsets_per_topic_and_the_describe_lag_per_group():
    admin = StandInAdmin()
    sampler = Sampler(admin, SampleRing(60_000, 1_000), clock_ms=lambda: 42)
    sample = sampler.sample()
    assert sample.time_ms == 42
    assert sample.topic_end_offsets == {"a": 15, "b": 7}
    # a-0: 10 - 4; a-1: assigned, nothing committed (no lag); b-0: 7 - 7
    assert sample.group_lags == {"g": 6}


def test_a_topic_with_an_unanswered_partition_is_left_out_of_the_sample():
    admin = StandInAdmin()
    admin.unanswered = {A1}
    sample = Sampler(admin, SampleRing(60_000, 1_000)).sample()
    assert sample.topic_end_offsets == {"b": 7}


def test_topics_are_described_again_only_now_and_then():
    admin = StandInAdmin()
    sampler = Sampler(admin, SampleRing(60_000, 1_000))
    for _ in range(DESCRIBE_EVERY_SAMPLES):
        sampler.sample()
    assert admin.describes == 1
    sampler.sample()
    assert admin.describes == 2


def test_the_task_samples_until_stopped():
    async def scenario() -> int:
        ring = SampleRing(60_000, 10_000)
        ticks = iter(range(1, 1000))
        sampler = Sampler(StandInAdmin(), ring, clock_ms=lambda: next(ticks))
        sampled = asyncio.Event()

        async def read(call):
            sample = call()
            sampled.set()
            return sample

        sampler.start(read)
        await asyncio.wait_for(sampled.wait(), 5)
        await sampler.stop()
        return len(ring)

    assert asyncio.run(scenario()) == 1


class FailingAdmin(StandInAdmin):
    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def list_topics(self) -> list[str]:
        if self.down:
            raise KafkaError("no broker answers", error=Errors.REQUEST_TIMED_OUT)
        return super().list_topics()


def read_once(sampler: Sampler) -> None:
    try:
        sampler.succeeded(sampler.sample())
    except Exception as exc:  # noqa: BLE001 - as the task does
        sampler.failed(exc)


def test_the_status_says_stale_while_samples_fail_and_fresh_once_they_succeed_again(caplog):
    now = [10_000]
    admin = FailingAdmin()
    sampler = Sampler(admin, SampleRing(60_000, 1_000), clock_ms=lambda: now[0])
    assert sampler.status()["stale"] and sampler.status()["last_sample_ms"] is None
    read_once(sampler)
    assert sampler.status() == {"last_sample_ms": 10_000, "stale": False, "failing_since_ms": None, "failures": 0,
                                "last_error": None}
    admin.down = True
    with caplog.at_level("WARNING", logger="services.gateway.ui.sampler"):
        for _ in range(5):
            now[0] += 1_000
            read_once(sampler)
    status = sampler.status()
    assert status["stale"] and status["last_sample_ms"] == 10_000 and status["failing_since_ms"] == 11_000
    assert status["failures"] == 5 and "REQUEST_TIMED_OUT" in status["last_error"]
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1  # rate-limited
    admin.down = False
    now[0] += 1_000
    read_once(sampler)
    assert sampler.status()["stale"] is False and sampler.status()["last_sample_ms"] == 16_000
    assert len(sampler.ring) == 2


def test_a_read_that_hangs_shows_stale_after_a_few_intervals():
    now = [10_000]
    sampler = Sampler(StandInAdmin(), SampleRing(60_000, 1_000), clock_ms=lambda: now[0])
    read_once(sampler)
    now[0] += 3_000
    assert not sampler.status()["stale"]
    now[0] += 1
    assert sampler.status()["stale"]
