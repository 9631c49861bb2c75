"""The console's sample ring and the rates and lags it charts."""

from __future__ import annotations

import pytest

from services.gateway.ui.series import Sample, SampleRing, series, topic_rates


def sample(time_ms: int, ends: dict[str, int] | None = None, lags: dict[str, int] | None = None) -> Sample:
    return Sample(time_ms, ends or {}, lags or {})


def test_the_ring_keeps_only_its_window():
    ring = SampleRing(window_ms=10_000, interval_ms=2_000)
    for second in range(0, 30, 2):
        ring.add(sample(second * 1000))
    times = [s.time_ms for s in ring.samples()]
    assert times == list(range(18_000, 30_000, 2_000))
    assert len(ring) == 6


def test_the_ring_is_bounded_by_count_even_when_samples_come_fast():
    ring = SampleRing(window_ms=10_000, interval_ms=2_000)
    for ms in range(0, 5_000, 100):
        ring.add(sample(ms))
    assert len(ring) == 10_000 // 2_000 + 1
    assert ring.samples()[-1].time_ms == 4_900


def test_a_sample_not_newer_than_the_last_is_dropped():
    ring = SampleRing(window_ms=10_000, interval_ms=1_000)
    ring.add(sample(5_000, {"a": 1}))
    ring.add(sample(5_000, {"a": 2}))
    ring.add(sample(4_000, {"a": 3}))
    assert [s.topic_end_offsets["a"] for s in ring.samples()] == [1]


def test_a_ring_needs_a_positive_window_and_interval():
    with pytest.raises(ValueError):
        SampleRing(window_ms=0, interval_ms=1_000)
    with pytest.raises(ValueError):
        SampleRing(window_ms=1_000, interval_ms=0)


def test_rates_are_end_offset_deltas_per_second():
    before = sample(1_000, {"a": 100, "b": 50, "gone": 7})
    after = sample(3_000, {"a": 300, "b": 40, "new": 9})
    # a: 200 messages in 2 s; b went back (re-created): 0; "new" has no earlier sample; "gone" is gone
    assert topic_rates(before, after) == {"a": 100.0, "b": 0.0}


def test_rates_of_samples_at_the_same_time_are_empty():
    assert topic_rates(sample(1_000, {"a": 1}), sample(1_000, {"a": 5})) == {}


def test_series_points_follow_the_samples():
    samples = [sample(0, {"a": 0, "b": 0}, {"g": 5}),
               sample(1_000, {"a": 10, "b": 1}, {"g": 7}),
               sample(3_000, {"a": 30, "b": 1}, {"g": 4})]
    answer = series(samples)
    assert answer["topics"] == ["a", "b"]
    assert answer["groups"] == ["g"]
    assert answer["points"] == [
        {"time_ms": 1_000, "total_rate": 11.0, "rates": {"a": 10.0, "b": 1.0}, "lags": {"g": 7}},
        {"time_ms": 3_000, "total_rate": 10.0, "rates": {"a": 10.0, "b": 0.0}, "lags": {"g": 4}},
    ]


def test_series_names_only_the_busiest_topics_and_most_lagging_groups_but_totals_all():
    first = sample(0, {f"t{i}": 0 for i in range(5)}, {f"g{i}": 0 for i in range(4)})
    second = sample(1_000, {f"t{i}": i * 10 for i in range(5)}, {f"g{i}": i for i in range(4)})
    answer = series([first, second], top_topics=2, top_groups=1)
    assert answer["topics"] == ["t3", "t4"]
    assert answer["groups"] == ["g3"]
    (point,) = answer["points"]
    assert point["rates"] == {"t3": 30.0, "t4": 40.0}
    assert point["total_rate"] == 100.0
    assert point["lags"] == {"g3": 3}


def test_series_of_fewer_than_two_samples_has_no_points():
    assert series([])["points"] == []
    assert series([sample(0, {"a": 1}, {"g": 1})]) == {"topics": [], "groups": [], "points": []}


def test_a_point_without_any_comparable_topic_has_no_total():
    (point,) = series([sample(0, {}), sample(1_000, {"new": 5})])["points"]
    assert point["total_rate"] is None and point["rates"] == {}


def test_deleted_topics_and_groups_leave_the_legend_at_once():
    samples = [Sample(0, {"gone": 0, "kept": 0}, {"old-group": 5, "g": 1}),
               Sample(1000, {"gone": 100, "kept": 10}, {"old-group": 5, "g": 2}),
               Sample(2000, {"kept": 20}, {"g": 3})]
    answer = series(samples)
    assert answer["topics"] == ["kept"] and answer["groups"] == ["g"]
    assert answer["points"][0]["rates"] == {"kept": 10.0}
