"""The history of a fault run: every operation of the workload's clients and every fault, in the
order they happened, as Jepsen records one.

An operation is an `Op`: the `process` that did it (a producer, a consumer, the nemesis), its
`type` (`invoke` when it starts; `ok`, `fail` or `info` when it ends: ok succeeded, fail surely
did not take effect, info may or may not have), the function `f` (`send`, `poll`, `commit`,
`txn`, `assigned`, `revoked`, a fault's name), its `value`, and where known the `partition` and
`offset`. `time_s` is monotonic; `History.wall_offset_s` turns it into wall-clock time, which the
brokers' logs use.

Values are written by producers as `<producer>:<sequence>` so every value is unique and says who
wrote it and in which order; `parse_value` reads them back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
# The process that records faults (`info` ops named after the fault, `heal` as each ends, and
# `crashed` with the service's name when one was found dead that no fault had killed, `failed`
# with the nemesis's record of an op it could not apply).
NEMESIS, HEAL, CRASHED, FAILED = "nemesis", "heal", "crashed", "failed"


@dataclass(frozen=True)
class Op:
    process: str
    type: str
    f: str
    value: Any = None
    partition: int | None = None
    offset: int | None = None
    time_s: float = 0.0


def make_value(producer: str, sequence: int) -> bytes:
    return f"{producer}:{sequence}".encode()


def parse_value(value: bytes) -> tuple[str, int]:
    """(producer, sequence) of a value `make_value` wrote."""
    producer, _, sequence = value.decode().rpartition(":")
    return producer, int(sequence)


class History:
    """Operations appended by many threads, kept in the order of their append."""

    def __init__(self, ops: list[Op] | None = None, wall_offset_s: float | None = None) -> None:
        self._ops: list[Op] = list(ops or [])
        self._lock = threading.Lock()
        self.wall_offset_s = time.time() - time.monotonic() if wall_offset_s is None else wall_offset_s

    def add(self, process: str, type: str, f: str, value: Any = None, partition: int | None = None,
            offset: int | None = None) -> Op:
        with self._lock:
            op = Op(process, type, f, value, partition, offset, time.monotonic())
            self._ops.append(op)
        return op

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self._ops)

    def wall_time_s(self, op: Op) -> float:
        return op.time_s + self.wall_offset_s

    def save(self, path: Path) -> None:
        """One JSON object per line, the first holding the wall-clock offset; bytes as {"$b": text},
        tuples as lists."""
        with open(path, "w", encoding="utf-8") as out:
            out.write(json.dumps({"wall_offset_s": self.wall_offset_s}) + "\n")
            for op in self.ops:
                out.write(json.dumps(_encode(asdict(op))) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        ops = [Op(**json.loads(line, object_hook=_decode_bytes)) for line in lines[1:]]
        return cls(ops, header["wall_offset_s"])


def _encode(item: Any) -> Any:
    if isinstance(item, bytes):
        return {"$b": item.decode("utf-8", errors="surrogateescape")}
    if isinstance(item, dict):
        return {key: _encode(value) for key, value in item.items()}
    if isinstance(item, list | tuple):
        return [_encode(value) for value in item]
    return item


def _decode_bytes(entry: dict) -> Any:
    if set(entry) == {"$b"}:
        return entry["$b"].encode("utf-8", errors="surrogateescape")
    return entry
