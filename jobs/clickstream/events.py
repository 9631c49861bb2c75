"""The clickstream's page-view event: its JSON shape, the rules that make one valid, its Spark schema,
and the aggregates the jobs must produce, computed in plain Python.

An event is one JSON object of strings, sent as a record's value (its key is the user id):

    {"event_id", "user_id", "session_id", "page", "referrer", "user_agent", "event_time"}

`event_time` is ISO-8601 UTC with milliseconds (`2026-11-26T10:00:00.000Z`); `referrer` and
`user_agent` may be null. A record is dead-lettered, for the first reason that applies, when:
no field can be read (not a JSON object: `unparseable`), a required field is null, empty or absent
(`missing <field>`), `page` is not a path starting with `/` (`bad page`), or `event_time` is not a
real instant in that exact format (`bad event_time`). Spark reads a JSON scalar given for a string
field as its text (`42` becomes `"42"`), so the rules look at field text, and a number where text
is expected fails them only where the text is checked (page, event_time); `field_text` mirrors that.

Valid events are counted per page per one-minute event-time window (page views, and unique users
exactly); a window is written once the watermark, the largest event time seen less two minutes,
has reached its end. `expected_aggregates` applies the same rules to the values that were sent, so
it checks the jobs independently of Spark.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

EVENT_FIELDS = ("event_id", "user_id", "session_id", "page", "referrer", "user_agent", "event_time")
REQUIRED_FIELDS = ("event_id", "user_id", "session_id", "page", "event_time")
EVENT_SCHEMA_DDL = ", ".join(f"{field} string" for field in EVENT_FIELDS)

# event_time: Spark's datetime pattern and the same format as a regular expression.
EVENT_TIME_SPARK_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSX"
EVENT_TIME_REGEX = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
_EVENT_TIME = re.compile(EVENT_TIME_REGEX)
PAGE_PREFIX = "/"

WINDOW_MS = 60_000
WATERMARK_DELAY_MS = 120_000
WINDOW_DURATION = "1 minute"
WATERMARK_DELAY = "2 minutes"

UNPARSEABLE = "unparseable"
BAD_PAGE = "bad page"
BAD_EVENT_TIME = "bad event_time"
DEAD_LETTER_REASON_HEADER = "dead-letter-reason"


def missing(field: str) -> str:
    """The dead-letter reason of a required field that is null, empty or absent."""
    return f"missing {field}"


def format_event_time(epoch_ms: int) -> str:
    """`2026-11-26T10:00:00.000Z` for a UTC instant in epoch milliseconds."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


def parse_event_time(text: str) -> int | None:
    """Epoch milliseconds of an `event_time`, or None when it is not a real instant in the format."""
    if not _EVENT_TIME.match(text):
        return None
    try:
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


def field_text(value: object) -> str | None:
    """A JSON field as Spark reads it into a string column: a string as is, null as None, any other
    JSON value as its compact JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class PageView:
    """A valid event, as the aggregation uses it."""

    user_id: str
    page: str
    event_time_ms: int


def read_event(value: bytes) -> PageView | str:
    """The page view a record value holds, or the reason it goes to the dead-letter topic."""
    try:
        document = json.loads(value.decode("utf-8", errors="replace"))
    except ValueError:
        return UNPARSEABLE
    if not isinstance(document, dict):
        return UNPARSEABLE
    fields = {field: field_text(document.get(field)) for field in EVENT_FIELDS}
    if all(text is None for text in fields.values()):
        return UNPARSEABLE
    for field in REQUIRED_FIELDS:
        if not fields[field]:
            return missing(field)
    if not fields["page"].startswith(PAGE_PREFIX):
        return BAD_PAGE
    event_time_ms = parse_event_time(fields["event_time"])
    if event_time_ms is None:
        return BAD_EVENT_TIME
    return PageView(fields["user_id"], fields["page"], event_time_ms)


@dataclass(frozen=True, order=True)
class WindowAggregate:
    """One output row: a page's views and unique users in the minute starting at `window_start_ms`."""

    window_start_ms: int
    page: str
    page_views: int
    unique_users: int


def window_start_ms(event_time_ms: int) -> int:
    return event_time_ms - event_time_ms % WINDOW_MS


def closed(window_start: int, max_event_time_ms: int) -> bool:
    """Whether the watermark of a stream whose largest event time is `max_event_time_ms` has passed
    the window's end, so that append mode has written it."""
    return window_start + WINDOW_MS <= max_event_time_ms - WATERMARK_DELAY_MS


def expected_aggregates(values: Iterable[bytes]) -> list[WindowAggregate]:
    """The closed windows' aggregates of the valid events among `values`, sorted by window and page.

    Every valid event is counted: the generator sends none behind the watermark."""
    views: dict[tuple[int, str], int] = defaultdict(int)
    users: dict[tuple[int, str], set[str]] = defaultdict(set)
    max_event_time_ms: int | None = None
    for value in values:
        event = read_event(value)
        if isinstance(event, str):
            continue
        slot = (window_start_ms(event.event_time_ms), event.page)
        views[slot] += 1
        users[slot].add(event.user_id)
        max_event_time_ms = max(event.event_time_ms, max_event_time_ms or event.event_time_ms)
    if max_event_time_ms is None:
        return []
    return [WindowAggregate(start, page, views[(start, page)], len(users[(start, page)]))
            for start, page in sorted(views) if closed(start, max_event_time_ms)]


def dead_letter_reasons(values: Iterable[bytes]) -> list[tuple[bytes, str]]:
    """(value, reason) of each value that goes to the dead-letter topic, in order."""
    found = []
    for value in values:
        event = read_event(value)
        if isinstance(event, str):
            found.append((value, event))
    return found
