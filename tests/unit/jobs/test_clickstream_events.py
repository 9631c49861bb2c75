"""The clickstream event rules and the expected aggregates, in plain Python: each dead-letter reason,
exact event-time parsing, per-window counts of page views and unique users, and which windows the
watermark has closed."""

from __future__ import annotations

import gzip
import json

import pytest

from jobs.clickstream import events
from jobs.clickstream.events import WindowAggregate

T0 = events.parse_event_time("2026-11-26T10:00:00.000Z")


def view(user: str, page: object, at_ms: int, **changes: object) -> bytes:
    document = {"event_id": f"e-{user}-{at_ms}", "user_id": user, "session_id": f"s-{user}", "page": page,
                "referrer": None, "user_agent": "Mozilla/5.0", "event_time": events.format_event_time(at_ms)}
    document.update(changes)
    return json.dumps({k: v for k, v in document.items() if v is not ...}).encode()


def test_event_times_round_trip_and_only_real_instants_in_the_exact_format_parse():
    assert T0 == 1_795_687_200_000
    assert events.format_event_time(T0 + 61_005) == "2026-11-26T10:01:01.005Z"
    assert events.parse_event_time(events.format_event_time(T0 + 123_456)) == T0 + 123_456
    for text in ("2026-02-30T10:00:00.000Z", "2026-11-26T10:00:00.000", "2026-11-26T10:00:00Z",
                 "2026-11-26T10:00:00.000+01:00", "2026-11-26 10:00:00.000Z", "2026-11-26T24:00:00.000Z",
                 "yesterday", ""):
        assert events.parse_event_time(text) is None, text


@pytest.mark.parametrize(("value", "reason"), [
    (b'{"event_id": "e1", "user', events.UNPARSEABLE),
    (b"GET / HTTP/1.1", events.UNPARSEABLE),
    (gzip.compress(view("u1", "/", T0), mtime=0), events.UNPARSEABLE),
    (b"[1, 2]", events.UNPARSEABLE),
    (b"{}", events.UNPARSEABLE),
    (b"", events.UNPARSEABLE),
    (view("u1", "/", T0, user_id=...), events.missing("user_id")),
    (view("u1", "/", T0, session_id=None), events.missing("session_id")),
    (view("u1", "/", T0, event_id=""), events.missing("event_id")),
    (view("u1", "/", T0, event_time=None), events.missing("event_time")),
    (view("u1", "https://shop.example.com/", T0), events.BAD_PAGE),
    (view("u1", 42, T0), events.BAD_PAGE),
    (view("u1", "/", T0, event_time=T0), events.BAD_EVENT_TIME),
    (view("u1", "/", T0, event_time="2026-02-30T10:00:00.000Z"), events.BAD_EVENT_TIME),
])
def test_each_rule_names_its_dead_letter_reason(value: bytes, reason: str):
    assert events.read_event(value) == reason
    assert events.dead_letter_reasons([view("u2", "/", T0), value]) == [(value, reason)]


def test_optional_fields_may_be_null_or_absent_and_scalars_read_as_text():
    assert events.read_event(view("u1", "/cart", T0, referrer=..., user_agent=None)) == \
        events.PageView("u1", "/cart", T0)
    assert events.read_event(view("u1", "/cart", T0, user_id=7)) == events.PageView("7", "/cart", T0)


def test_aggregates_count_views_and_distinct_users_per_page_per_minute():
    values = [view("u1", "/", T0), view("u1", "/", T0 + 59_999), view("u2", "/", T0 + 30_000),
              view("u1", "/cart", T0 + 5_000), view("u3", "/", T0 + 60_000), b"not json",
              view("u9", "/", T0 + 400_000)]  # closes every window before T0 + 280 s
    assert events.expected_aggregates(values) == [
        WindowAggregate(T0, "/", 3, 2), WindowAggregate(T0, "/cart", 1, 1), WindowAggregate(T0 + 60_000, "/", 1, 1)]


def test_a_window_is_closed_once_the_watermark_reaches_its_end():
    window_end = T0 + events.WINDOW_MS
    assert events.closed(T0, window_end + events.WATERMARK_DELAY_MS)
    assert not events.closed(T0, window_end + events.WATERMARK_DELAY_MS - 1)
    values = [view("u1", "/", T0), view("u2", "/", window_end + events.WATERMARK_DELAY_MS - 1)]
    assert events.expected_aggregates(values) == []
    assert events.expected_aggregates([b"{]"]) == []
