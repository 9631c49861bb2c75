"""`Sampler`: the gateway's background reader of the console's series, into a `SampleRing`.

Every `interval_ms` it reads, with the process's `Admin`, every topic's log end offsets and every
consumer group's committed offsets, and adds one `Sample`: each topic's end offsets summed, and each
group's lag summed over the rows `odradek consumer-groups --describe` shows (`cli_groups.
partition_offsets`, on the same end offsets). One ListOffsets request per leader serves all topics
and groups; the topics' partitions are described again only when the topic names change or every
`DESCRIBE_EVERY_SAMPLES` samples. A failed read is skipped and the next one tried at the next
interval; `status()` says when the last good sample was taken, whether the series is stale (no
good sample for `STALE_AFTER_INTERVALS` intervals, also while a read hangs) and the last error.
Failures are logged at WARNING when they start and then at most every `WARN_EVERY_MS` while they
go on; the recovery is logged too. `stop()` ends the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from services.clients.admin import Admin
from services.clients.admin_types import TopicDescription
from services.clients.cli_groups import partition_offsets
from services.common.topic_partition import TopicPartition
from services.gateway.ui.series import Sample, SampleRing

logger = logging.getLogger(__name__)

DESCRIBE_EVERY_SAMPLES = 10
STALE_AFTER_INTERVALS = 3
WARN_EVERY_MS = 60000


class Sampler:
    def __init__(self, admin: Admin, ring: SampleRing, *, clock_ms: Callable[[], int] | None = None) -> None:
        self.admin = admin
        self.ring = ring
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._partitions: dict[str, list[TopicPartition]] = {}
        self._samples_since_describe = 0
        self._stopped = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.last_good_ms: int | None = None
        self.failing_since_ms: int | None = None
        self.failures = 0
        self.last_error: str | None = None
        self._last_warning_ms: int | None = None

    # ------------------------------------------------------------------ one sample (blocking)

    def _topic_partitions(self) -> dict[str, list[TopicPartition]]:
        names = set(self.admin.list_topics())
        stale = self._samples_since_describe >= DESCRIBE_EVERY_SAMPLES
        if stale or names != set(self._partitions):
            described = self.admin.describe_topics(sorted(names), raise_errors=False)
            self._partitions = {name: [info.topic_partition for info in topic.partitions]
                                for name, topic in described.items() if isinstance(topic, TopicDescription)}
            self._samples_since_describe = 0
        self._samples_since_describe += 1
        return self._partitions

    def sample(self) -> Sample:
        """Reads the cluster once and returns what it saw."""
        topics = self._topic_partitions()
        group_ids = [listing.group_id for listing in self.admin.list_consumer_groups()]
        groups = self.admin.describe_consumer_groups(group_ids) if group_ids else {}
        committed = {group_id: self.admin.list_consumer_group_offsets(group_id) for group_id in groups}
        wanted = {tp for partitions in topics.values() for tp in partitions}
        wanted.update(tp for offsets in committed.values() for tp in offsets)
        wanted.update(tp for group in groups.values() for member in group.members for tp in member.assignment)
        ends = self.admin.list_offsets(dict.fromkeys(wanted, "latest"), raise_errors=False) if wanted else {}
        topic_ends = {}
        for name, partitions in topics.items():
            offsets = [getattr(ends.get(tp), "offset", None) for tp in partitions]
            if all(isinstance(offset, int) for offset in offsets):
                topic_ends[name] = sum(offsets)
        lags = {group_id: sum(row.lag for row in partition_offsets(group, committed[group_id], ends)
                              if row.lag is not None)
                for group_id, group in groups.items()}
        return Sample(self.clock_ms(), topic_ends, lags)

    # ------------------------------------------------------------------ the task

    def succeeded(self, sample: Sample) -> None:
        self.ring.add(sample)
        self.last_good_ms = sample.time_ms
        if self.failing_since_ms is not None:
            logger.info("console samples succeed again after %d failures since %d ms", self.failures,
                        self.failing_since_ms)
        self.failing_since_ms, self.failures, self.last_error, self._last_warning_ms = None, 0, None, None

    def failed(self, error: BaseException) -> None:
        now_ms = self.clock_ms()
        if self.failing_since_ms is None:
            self.failing_since_ms = now_ms
        self.failures += 1
        self.last_error = f"{type(error).__name__}: {error}"
        if self._last_warning_ms is None or now_ms - self._last_warning_ms >= WARN_EVERY_MS:
            self._last_warning_ms = now_ms
            logger.warning("console sample failed (%d in a row): %s", self.failures, self.last_error)

    def status(self) -> dict[str, object]:
        """{"last_sample_ms", "stale", "failing_since_ms", "failures", "last_error"}: stale when no good
        sample came for STALE_AFTER_INTERVALS intervals (or none yet), so a read that hangs shows too."""
        now_ms = self.clock_ms()
        overdue_ms = STALE_AFTER_INTERVALS * self.ring.interval_ms
        stale = self.last_good_ms is None or now_ms - self.last_good_ms > overdue_ms or self.failures > 0
        return {"last_sample_ms": self.last_good_ms, "stale": stale, "failing_since_ms": self.failing_since_ms,
                "failures": self.failures, "last_error": self.last_error}

    async def _run(self, read: Callable[[Callable[[], Sample]], object]) -> None:
        interval_s = self.ring.interval_ms / 1000
        while not self._stopped.is_set():
            try:
                self.succeeded(await read(self.sample))
            except Exception as exc:  # noqa: BLE001 - a cluster that does not answer now may later
                self.failed(exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), interval_s)

    def start(self, read: Callable[[Callable[[], Sample]], object]) -> None:
        """Starts sampling on the running loop; `read(call)` awaits `call()` off the loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(read), name="console-sampler")

    async def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
