"""The clickstream generator, without a cluster: the same seed gives the same records; the shares of
late and malformed records; every late view within the watermark of what was sent before it; the
malformed ones exactly those the event rules reject; realistic sessions; the closing view that
closes every window of traffic; the produce body."""

from __future__ import annotations

import base64
import json
from collections import Counter

from jobs.clickstream import events, generator
from jobs.clickstream.generator import CLOSING, LATE, MALFORMED, VALID

START_MS = events.parse_event_time("2026-11-26T10:00:00.000Z")


def generated(count: int = 2000, seed: int = 7) -> generator.GeneratedEvents:
    return generator.generate_events(count, seed=seed, start_ms=START_MS, late_share=0.1, malformed_share=0.05)


def test_the_same_seed_gives_the_same_records_and_another_seed_others():
    assert generated().records == generated().records
    assert generated().records != generated(seed=8).records


def test_counts_and_shares():
    sent = generated()
    counts = sent.counts()
    assert len(sent.records) == 2000
    assert counts[MALFORMED] == 100 and counts[CLOSING] == 1 and sent.records[-1].kind == CLOSING
    assert counts[LATE] == round(1899 * 0.1) and counts[VALID] == 1899 - counts[LATE]
    assert set(Counter(r.malformed_kind for r in sent.malformed())) == set(generator.MALFORMED_KINDS)


def test_the_malformed_records_are_exactly_those_the_rules_reject():
    sent = generated()
    rejected = events.dead_letter_reasons(sent.values())
    assert [value for value, _ in rejected] == [record.value for record in sent.malformed()]
    assert {reason.split()[0] for _, reason in rejected} >= {"unparseable", "missing", "bad"}


def test_late_views_are_behind_views_sent_before_them_but_within_the_watermark():
    sent = generated()
    latest_ms, lags_ms = None, []
    for record in sent.records:
        event = events.read_event(record.value)
        if isinstance(event, str):
            continue
        if latest_ms is not None:
            assert event.event_time_ms > latest_ms - events.WATERMARK_DELAY_MS
            if record.kind == LATE:
                lags_ms.append(latest_ms - event.event_time_ms)
        latest_ms = max(latest_ms or event.event_time_ms, event.event_time_ms)
    assert len(lags_ms) > 150 and sum(lag > 0 for lag in lags_ms) > 0.9 * len(lags_ms)
    assert max(lags_ms) <= generator.LATE_MAX_MS


def test_the_closing_view_closes_every_window_of_traffic_and_only_its_own_stays_open():
    sent = generated()
    views = [event for event in map(events.read_event, sent.values()) if not isinstance(event, str)]
    traffic_windows = {(events.window_start_ms(v.event_time_ms), v.page) for v in views[:-1]}
    closing = events.read_event(sent.records[-1].value)
    written = {(row.window_start_ms, row.page) for row in events.expected_aggregates(sent.values())}
    assert written == traffic_windows - {(events.window_start_ms(closing.event_time_ms), closing.page)}
    assert events.window_start_ms(closing.event_time_ms) > max(start for start, _ in traffic_windows)


def test_traffic_looks_like_a_site_visited_in_sessions():
    sent = generated()
    documents = [json.loads(r.value) for r in sent.records if r.kind in (VALID, LATE)]
    pages = Counter(d["page"] for d in documents).most_common()
    assert pages[0][0] == "/" and pages[0][1] > 3 * pages[-1][1]
    sessions = Counter(d["session_id"] for d in documents)
    assert 2.5 < len(documents) / len(sessions) < 6
    by_user = {}
    for d in documents:
        assert d["user_agent"] in generator.USER_AGENTS
        assert by_user.setdefault(d["user_id"], d["user_agent"]) == d["user_agent"]
    assert any(d["referrer"] and d["referrer"].startswith(generator.SITE) for d in documents)
    assert all(r.key == json.loads(r.value)["user_id"].encode() for r in sent.records if r.kind != MALFORMED)


def test_the_produce_body_is_rest_proxy_v2_binary():
    records = generated(20).records[:3]
    body = json.loads(generator.produce_body(records))
    assert [base64.b64decode(r["value"]) for r in body["records"]] == [r.value for r in records]
    assert [base64.b64decode(r["key"]) for r in body["records"]] == [r.key for r in records]
