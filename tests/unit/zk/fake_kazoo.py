"""`FakeKazoo`: an in-memory znode tree with the parts of kazoo's client that `OdradekZkClient`'s
topic and controller operations use (reads, pipelined reads, creates and atomic transactions), for
unit tests of how writes are split into multis.

Every committed transaction is recorded with its jute-encoded size (kazoo's own serialization
plus the request header), so tests can check the bounds. `die_after_commits` makes the client
fail with a connection loss once that many transactions have been applied, as a controller killed
between two multis would leave the tree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.serialization import CheckVersion, Create, Delete, SetData, Transaction
from kazoo.security import OPEN_ACL_UNSAFE

REQUEST_HEADER_BYTES = 12  # length prefix, xid and op type before the multi itself


class _Result:
    def __init__(self, value=None, error: Exception | None = None) -> None:
        self._value, self._error = value, error

    def get(self):
        if self._error is not None:
            raise self._error
        return self._value


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


@dataclass
class FakeKazoo:
    nodes: dict[str, tuple[bytes, int]] = field(default_factory=lambda: {"/": (b"", 0)})
    committed: list[tuple[int, int]] = field(default_factory=list)  # (ops, encoded bytes)
    die_after_commits: int | None = None
    children: dict[str, set[str]] = field(default_factory=dict)
    sequence: int = 0
    ctimes: dict[str, int] = field(default_factory=dict)  # creation times (ms) of nodes created here

    # --- reads --------------------------------------------------------------------------------

    def exists(self, path: str, watch=None):
        found = self.nodes.get(path)
        return None if found is None else SimpleNamespace(version=found[1], ctime=self.ctimes.get(path, 0))

    def get(self, path: str, watch=None):
        if path not in self.nodes:
            raise NoNodeError(path)
        data, version = self.nodes[path]
        return data, SimpleNamespace(version=version)

    def get_async(self, path: str, watch=None) -> _Result:
        try:
            return _Result(self.get(path))
        except NoNodeError as exc:
            return _Result(error=exc)

    def get_children(self, path: str, watch=None) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return sorted(self.children.get(path, ()))

    # --- writes -------------------------------------------------------------------------------

    def ensure_path(self, path: str) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            if prefix not in self.nodes:
                self._apply([("create", prefix, b"", -1)])
                self.committed.pop()

    def create(self, path: str, value: bytes = b"", *, sequence: bool = False, makepath: bool = False,
               **_kwargs) -> str:
        if sequence:
            path = f"{path}{self.sequence:010d}"
            self.sequence += 1
        if makepath:
            self.ensure_path(_parent(path))
        results = self._apply([("create", path, value, -1)])
        if isinstance(results[0], Exception):
            raise results[0]
        self.committed.pop()
        return path

    def delete(self, path: str, version: int = -1) -> None:
        results = self._apply([("delete", path, b"", version)])
        if isinstance(results[0], Exception):
            raise results[0]
        self.committed.pop()

    def transaction(self) -> FakeTransaction:
        return FakeTransaction(self)

    def _apply(self, ops: list[tuple], size_bytes: int = 0) -> list:
        """Applies all ops or none, answering as ZooKeeper's multi does."""
        if self.die_after_commits is not None and len(self.committed) >= self.die_after_commits:
            raise ConnectionLoss("the fake ZooKeeper connection is gone")
        undo: list[tuple[str, tuple[bytes, int] | None]] = []
        results: list = []
        for kind, path, value, version in ops:
            error = self._apply_one(kind, path, value, version, undo)
            if error is not None:
                for undone, old in reversed(undo):
                    self._put(undone, old)
                index = len(results)
                return [RolledBackError()] * index + [error] + [RuntimeInconsistency()] * (len(ops) - index - 1)
            if kind == "set":
                results.append(SimpleNamespace(version=self.nodes[path][1]))
            else:
                results.append(path if kind == "create" else True)
        self.committed.append((len(ops), size_bytes))
        return results

    def _apply_one(self, kind: str, path: str, value: bytes, version: int, undo: list) -> Exception | None:
        found = self.nodes.get(path)
        if kind == "create":
            if found is not None:
                return NodeExistsError(path)
            if _parent(path) not in self.nodes:
                return NoNodeError(path)
            undo.append((path, None))
            self._put(path, (value, 0))
            self.ctimes[path] = int(time.time() * 1000)
            return None
        if found is None:
            return NoNodeError(path)
        if version != -1 and found[1] != version:
            return BadVersionError(path)
        if kind == "delete":
            if self.children.get(path):
                return NotEmptyError(path)
            undo.append((path, found))
            self._put(path, None)
        elif kind == "set":
            undo.append((path, found))
            self._put(path, (value, found[1] + 1))
        return None

    def _put(self, path: str, value: tuple[bytes, int] | None) -> None:
        name = path.rsplit("/", 1)[1]
        if value is None:
            del self.nodes[path]
            self.children[_parent(path)].discard(name)
        else:
            self.nodes[path] = value
            self.children.setdefault(_parent(path), set()).add(name)


class FakeTransaction:
    def __init__(self, client: FakeKazoo) -> None:
        self._client = client
        self._ops: list[tuple] = []
        self._jute: list = []

    def create(self, path: str, value: bytes = b"", *, sequence: bool = False, **_kwargs) -> None:
        if sequence:
            path = f"{path}{self._client.sequence:010d}"
            self._client.sequence += 1
        self._ops.append(("create", path, value, -1))
        self._jute.append(Create(path, value, OPEN_ACL_UNSAFE, 0))

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(("delete", path, b"", version))
        self._jute.append(Delete(path, version))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.append(("set", path, value, version))
        self._jute.append(SetData(path, value, version))

    def check(self, path: str, version: int) -> None:
        self._ops.append(("check", path, b"", version))
        self._jute.append(CheckVersion(path, version))

    def commit_async(self) -> _Result:
        size_bytes = REQUEST_HEADER_BYTES + len(Transaction(self._jute).serialize())
        return _Result(self._client._apply(self._ops, size_bytes))
