"""What the gateway's OpenAPI says of the values its requests carry, where routes of several
modules take the same kind of value: topic names, 64-bit numbers, JSON integers."""

from __future__ import annotations

from typing import Any

# Kafka's rules for a topic name: 1 to 249 ASCII letters, digits, '.', '_' and '-', not "." or "..".
TOPIC_NAME_PATTERN = r"^(?!\.{1,2}$)[a-zA-Z0-9._-]{1,249}$"

# The largest 64-bit number (an offset, a timestamp) a request may carry: the largest integer a JSON
# number read as a double holds exactly (and every smaller one), so a client computing with doubles
# keeps within the bound checked.
INT64_JSON_MAX = 2**53 - 1


def json_integer(value: Any) -> int | None:
    """An integer as JSON Schema reads one (3, or 3.0), else None (true, "3", 3.5)."""
    if value.__class__ is int:
        return value
    if value.__class__ is float and value.is_integer():
        return int(value)
    return None
