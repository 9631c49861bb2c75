"""The console's throughput and lag series: a bounded ring of samples and the rates between them.

A `Sample` is what the sampler read at one moment: each topic's log end offset summed over its
partitions and each consumer group's total lag. `SampleRing` keeps the samples of the last
`window_ms` (at most `window_ms / interval_ms + 1` of them). `series` turns them into chart points:
per topic the messages produced per second between two consecutive samples (the end offsets'
difference over the seconds between them; 0 when the end went back, as a re-created topic's does;
none for a topic the earlier sample did not have), their total, and the groups' lags. Only the
`top_topics` busiest topics (by messages over the window) and the `top_groups` most lagging groups
(by their largest lag) are named per point, so a cluster of hundreds keeps the answer small; the
total still counts every topic. Only topics and groups the newest sample still has are named, so a
deleted topic or group leaves the legend at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sample:
    time_ms: int
    topic_end_offsets: Mapping[str, int]
    group_lags: Mapping[str, int]


class SampleRing:
    """The last `window_ms` of samples, oldest first."""

    def __init__(self, window_ms: int, interval_ms: int) -> None:
        if window_ms <= 0 or interval_ms <= 0:
            raise ValueError("window_ms and interval_ms must be positive")
        self.window_ms = window_ms
        self.interval_ms = interval_ms
        self._samples: deque[Sample] = deque(maxlen=window_ms // interval_ms + 1)

    def add(self, sample: Sample) -> None:
        """Appends `sample` (a sample older than the newest one is dropped) and forgets the samples
        older than the window before it."""
        if self._samples and sample.time_ms <= self._samples[-1].time_ms:
            return
        self._samples.append(sample)
        while self._samples[0].time_ms < sample.time_ms - self.window_ms:
            self._samples.popleft()

    def samples(self) -> list[Sample]:
        return list(self._samples)

    def __len__(self) -> int:
        return len(self._samples)


def topic_rates(before: Sample, after: Sample) -> dict[str, float]:
    """Messages per second of every topic both samples have, from `before` to `after`."""
    seconds = (after.time_ms - before.time_ms) / 1000
    if seconds <= 0:
        return {}
    rates = {}
    for topic, end in after.topic_end_offsets.items():
        start = before.topic_end_offsets.get(topic)
        if start is not None:
            rates[topic] = max(0, end - start) / seconds
    return rates


def _busiest(totals: Mapping[str, float], count: int) -> list[str]:
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return sorted(name for name, _ in ranked[:count])


def series(samples: Iterable[Sample], *, top_topics: int = 8, top_groups: int = 8) -> dict[str, Any]:
    """{"topics": [names], "groups": [names], "points": [{"time_ms", "total_rate", "rates": {topic:
    messages/s}, "lags": {group: lag}}]}: one point per sample after the first (its rates are
    those since the sample before, `total_rate` null when no topic has one; `lags` are the
    sample's own)."""
    ordered = list(samples)
    steps = [(after, topic_rates(before, after)) for before, after in zip(ordered, ordered[1:], strict=False)]
    produced: dict[str, float] = {}
    for _after, rates in steps:
        for topic, rate in rates.items():
            produced[topic] = produced.get(topic, 0.0) + rate
    largest_lag: dict[str, int] = {}
    for sample in ordered[1:]:
        for group, lag in sample.group_lags.items():
            largest_lag[group] = max(largest_lag.get(group, 0), lag)
    newest = ordered[-1] if ordered else None
    live_topics = newest.topic_end_offsets if newest else {}
    live_groups = newest.group_lags if newest else {}
    topics = _busiest({t: v for t, v in produced.items() if t in live_topics}, top_topics)
    groups = _busiest({g: v for g, v in largest_lag.items() if g in live_groups}, top_groups)
    points = [{"time_ms": after.time_ms, "total_rate": round(sum(rates.values()), 3) if rates else None,
               "rates": {t: round(rates[t], 3) for t in topics if t in rates},
               "lags": {g: after.group_lags[g] for g in groups if g in after.group_lags}}
              for after, rates in steps]
    return {"topics": topics, "groups": groups, "points": points}
