"""The clickstream generator: seeded, realistic page-view traffic with late and malformed records,
and its sending through the gateway's REST Proxy v2 produce API.

Traffic: users with a browser each (real user-agent strings) browse in sessions of several page
views a few seconds to a minute and a half apart; pages follow a Zipf-like popularity; a session's
first view comes from a search engine, a social site or nowhere, the next ones from the previous
page. A share of the views arrives late: sent up to `LATE_MAX_MS` after views whose event time is
later, which is within the jobs' two-minute watermark, so every late view is still counted. A share
of the records is malformed in each way the jobs reject (see `events`). The last record is a
closing view two minutes past the last window of traffic: it moves the watermark past every window
that holds traffic, so the streaming job writes them all (its own window stays open everywhere).

`generate_events` is pure (same seed, same records); `send_records` posts them in batches, keyed by
user id, and `ensure_topic` creates a topic through the gateway.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jobs.clickstream import events
from services.clients.spark.gateway import GatewayClient
from services.common.errors import KafkaError
from services.common.http_wire import V2_BINARY

SITE = "https://shop.example.com"
PAGES = ("/", "/search", "/products/espresso-machine", "/products/grinder", "/cart", "/products/kettle",
         "/deals", "/products/french-press", "/account", "/products/milk-frother", "/blog/brewing-guide",
         "/checkout", "/products/scale", "/help/shipping", "/products/beans-ethiopia", "/blog/latte-art",
         "/products/beans-colombia", "/about", "/help/returns", "/products/moka-pot", "/careers",
         "/products/cold-brew-kit", "/blog/water-chemistry", "/products/descaler", "/privacy")
ZIPF_EXPONENT = 1.1
PAGE_WEIGHTS = tuple(1 / rank ** ZIPF_EXPONENT for rank in range(1, len(PAGES) + 1))
EXTERNAL_REFERRERS = ("https://www.google.com/", "https://www.bing.com/", "https://duckduckgo.com/",
                      "https://t.co/", "https://www.reddit.com/r/Coffee/", "https://news.ycombinator.com/",
                      None, None, None)
USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 "
    "Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Mobile Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Safari/537.36 Edg/131.0.0.0",
)
SESSION_MEAN_VIEWS = 4
SESSION_MAX_VIEWS = 12
VIEW_GAP_MS = (3_000, 90_000)
VIEWS_PER_MINUTE = 200
LATE_MIN_MS = 20_000
LATE_MAX_MS = 75_000  # below the watermark delay, less the gap batches of different partitions may have
CLOSING_MARGIN_MS = 30_000
SEND_BATCH_RECORDS = 500

VALID, LATE, MALFORMED, CLOSING = "valid", "late", "malformed", "closing"
MALFORMED_KINDS = ("truncated json", "not json", "gzip body", "missing field", "null field", "empty field",
                   "page not a path", "page a number", "epoch event_time", "impossible date",
                   "event_time without zone", "event_time in words")


@dataclass(frozen=True)
class ProducedRecord:
    """A record as sent: key, value, and what it is (`VALID`, `LATE`, `MALFORMED` or `CLOSING`)."""

    key: bytes | None
    value: bytes
    kind: str
    malformed_kind: str | None = None


@dataclass
class GeneratedEvents:
    """What the generator sends, in sending order."""

    records: list[ProducedRecord] = field(default_factory=list)

    def values(self) -> list[bytes]:
        return [record.value for record in self.records]

    def malformed(self) -> list[ProducedRecord]:
        return [record for record in self.records if record.kind == MALFORMED]

    def counts(self) -> Counter[str]:
        return Counter(record.kind for record in self.records)

    def summary(self) -> str:
        counts = self.counts()
        return (f"{len(self.records)} records: {counts[VALID]} on time, {counts[LATE]} late, "
                f"{counts[MALFORMED]} malformed, {counts[CLOSING]} closing")


@dataclass(frozen=True)
class _View:
    document: dict[str, Any]
    event_time_ms: int


class _Traffic:
    """Sessions of page views by a fixed population of users."""

    def __init__(self, rng: random.Random, user_count: int) -> None:
        self.rng = rng
        self.users = [(f"u{rng.randrange(10**7):07d}", rng.choice(USER_AGENTS)) for _ in range(user_count)]

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def page(self) -> str:
        return self.rng.choices(PAGES, weights=PAGE_WEIGHTS)[0]

    def session(self, start_ms: int) -> list[_View]:
        user_id, user_agent = self.rng.choice(self.users)
        session_id = self.uuid()
        length = min(SESSION_MAX_VIEWS, 1 + int(self.rng.expovariate(1 / (SESSION_MEAN_VIEWS - 1))))
        referrer = self.rng.choice(EXTERNAL_REFERRERS)
        views, time_ms = [], start_ms
        for _ in range(length):
            page = self.page()
            views.append(_View({"event_id": self.uuid(), "user_id": user_id, "session_id": session_id,
                                "page": page, "referrer": referrer, "user_agent": user_agent,
                                "event_time": events.format_event_time(time_ms)}, time_ms))
            referrer = SITE + page
            time_ms += self.rng.randint(*VIEW_GAP_MS)
        return views


def generate_events(count: int, *, seed: int, start_ms: int, late_share: float = 0.05,
                    malformed_share: float = 0.05) -> GeneratedEvents:
    """About `count` records (exactly, for `count` >= 10): page views from `start_ms` on, a
    `late_share` of them late, a `malformed_share` of all records malformed, and the closing view."""
    rng = random.Random(seed)
    traffic = _Traffic(rng, max(20, count // 8))
    malformed_count = round(count * malformed_share)
    valid_count = max(1, count - malformed_count - 1)
    span_ms = max(events.WINDOW_MS, valid_count * 60_000 // VIEWS_PER_MINUTE)
    views: list[_View] = []
    while len(views) < valid_count:
        views += traffic.session(start_ms + rng.randrange(span_ms))
    views = sorted(views[:valid_count], key=lambda view: view.event_time_ms)
    late = set(rng.sample(range(valid_count), round(valid_count * late_share)))
    delays_ms = {i: rng.randint(LATE_MIN_MS, LATE_MAX_MS) for i in sorted(late)}
    arrivals = sorted(range(valid_count), key=lambda i: (views[i].event_time_ms + delays_ms.get(i, 0), i))
    records = [_record(views[i].document, LATE if i in late else VALID) for i in arrivals]
    kinds = [MALFORMED_KINDS[i % len(MALFORMED_KINDS)] for i in range(malformed_count)]
    rng.shuffle(kinds)
    for kind in kinds:
        source = traffic.session(start_ms + rng.randrange(span_ms))[0].document
        records.insert(rng.randrange(len(records) + 1), _malformed(rng, source, kind))
    last_ms = max(view.event_time_ms for view in views)
    closing_ms = events.window_start_ms(last_ms) + events.WINDOW_MS + events.WATERMARK_DELAY_MS + CLOSING_MARGIN_MS
    closing = traffic.session(closing_ms)[0].document
    records.append(_record(closing, CLOSING))
    return GeneratedEvents(records)


def _record(document: dict[str, Any], kind: str, malformed_kind: str | None = None) -> ProducedRecord:
    user_id = document.get("user_id")
    key = user_id.encode() if isinstance(user_id, str) and user_id else None
    return ProducedRecord(key, json.dumps(document, separators=(",", ":")).encode(), kind, malformed_kind)


def _malformed(rng: random.Random, document: dict[str, Any], kind: str) -> ProducedRecord:
    """`document` spoiled in the way `kind` names; its key stays the user's."""
    key = document["user_id"].encode()
    text = json.dumps(document, separators=(",", ":"))
    if kind == "truncated json":
        return ProducedRecord(key, text[:rng.randrange(1, len(text) - 1)].encode(), MALFORMED, kind)
    if kind == "not json":
        line = f'{document["user_id"]} - - [26/Nov/2026:10:00:00 +0000] "GET {document["page"]} HTTP/1.1" 200'
        return ProducedRecord(key, line.encode(), MALFORMED, kind)
    if kind == "gzip body":
        return ProducedRecord(key, gzip.compress(text.encode(), mtime=0), MALFORMED, kind)
    spoiled = dict(document)
    required = rng.choice(events.REQUIRED_FIELDS)
    if kind == "missing field":
        del spoiled[required]
    elif kind == "null field":
        spoiled[required] = None
    elif kind == "empty field":
        spoiled[required] = ""
    elif kind == "page not a path":
        spoiled["page"] = SITE + document["page"]
    elif kind == "page a number":
        spoiled["page"] = rng.randrange(1000)
    elif kind == "epoch event_time":
        spoiled["event_time"] = events.parse_event_time(document["event_time"])
    elif kind == "impossible date":
        spoiled["event_time"] = "2026-02-30" + document["event_time"][10:]
    elif kind == "event_time without zone":
        spoiled["event_time"] = document["event_time"].rstrip("Z")
    elif kind == "event_time in words":
        spoiled["event_time"] = "yesterday at noon"
    else:
        raise ValueError(f"unknown malformed kind {kind!r}")
    return ProducedRecord(key, json.dumps(spoiled, separators=(",", ":")).encode(), MALFORMED, kind)


def produce_body(records: list[ProducedRecord]) -> bytes:
    """A REST Proxy v2 binary-format produce body."""
    def b64(data: bytes | None) -> str | None:
        return None if data is None else base64.b64encode(data).decode("ascii")

    return json.dumps({"records": [{"key": b64(record.key), "value": b64(record.value)} for record in records]},
                      separators=(",", ":")).encode()


def send_records(client: GatewayClient, topic: str, records: list[ProducedRecord],
                 batch_records: int = SEND_BATCH_RECORDS) -> int:
    """POSTs the records in order to `/topics/{topic}`, `batch_records` per request; returns how many
    were written, or raises the first record's error."""
    for start in range(0, len(records), batch_records):
        response = client.request("POST", f"/topics/{topic}", headers={"Content-Type": V2_BINARY},
                                  content=produce_body(records[start:start + batch_records]))
        for entry in response.json()["offsets"]:
            if entry["error_code"] is not None:
                raise RuntimeError(f"producing to {topic} failed: {entry['error']} ({entry['error_code']})")
    return len(records)


def ensure_topic(client: GatewayClient, topic: str, partitions: int, replication_factor: int = 1) -> bool:
    """Creates the topic through the gateway; False when it exists already."""
    body = {"topic_name": topic, "partitions_count": partitions, "replication_factor": replication_factor}
    try:
        client.request("POST", client.cluster_path("/topics"), headers={"Content-Type": "application/json"},
                       content=json.dumps(body).encode())
    except KafkaError as error:
        if error.error_name == "TOPIC_ALREADY_EXISTS":
            return False
        raise
    return True
