"""ZooKeeper transactions, and controller-epoch fencing: every controller write is a transaction
whose first op is `check(/controller_epoch, version=<epoch zk version>)`.

A controller learns its epoch zk version when it is elected (`OdradekZkClient.elect_controller`).
Once another controller is elected, `/controller_epoch` has a newer version, the check fails, and
ZooKeeper applies none of the transaction's ops: the deposed controller's write leaves nothing
behind and raises `ControllerMovedError`. Any other failing op raises that op's kazoo exception
(NodeExistsError, BadVersionError, ...) with a note naming the op and path; a transaction is
all-or-nothing either way.

A transaction counts the encoded size of its ops (`bounded.op_bytes`); one that would exceed
`bounded.REQUEST_MAX_BYTES` is never sent: committing it raises `ZkRequestTooLargeError`, since
ZooKeeper would only drop the connection. Writes that grow with partitions are split with
`bounded.pack` before they get there.
"""

from __future__ import annotations

from typing import Any, Self

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, RolledBackError, RuntimeInconsistency
from kazoo.interfaces import IAsyncResult

from services.common.zk.bounded import REQUEST_MAX_BYTES, REQUEST_OVERHEAD_BYTES, ZkRequestTooLargeError, op_bytes
from services.common.zk.controller import CONTROLLER_EPOCH_PATH
from services.common.zk.errors import ControllerMovedError


class ZkTransaction:
    """Ops collected for one atomic commit; `commit()` returns the results of the added ops:
    the created path, the new ZnodeStat of a set, True for a delete or a check."""

    def __init__(self, zk: KazooClient):
        self._tx = zk.transaction()
        self._ops: list[str] = []
        self.size_bytes = REQUEST_OVERHEAD_BYTES

    def create(
        self, path: str, value: bytes = b"", *, ephemeral: bool = False, sequence: bool = False
    ) -> Self:
        self._tx.create(path, value, ephemeral=ephemeral, sequence=sequence)
        self._add(f"create {path}", path, value)
        return self

    def set_data(self, path: str, value: bytes, version: int = -1) -> Self:
        self._tx.set_data(path, value, version)
        self._add(f"set {path} at version {version}", path, value)
        return self

    def delete(self, path: str, version: int = -1) -> Self:
        self._tx.delete(path, version)
        self._add(f"delete {path}", path)
        return self

    def check(self, path: str, version: int) -> Self:
        self._tx.check(path, version)
        self._add(f"check {path} at version {version}", path)
        return self

    def _add(self, op: str, path: str, value: bytes = b"") -> None:
        self._ops.append(op)
        self.size_bytes += op_bytes(path, value)

    def commit_async(self) -> IAsyncResult:
        if self.size_bytes > REQUEST_MAX_BYTES:
            raise ZkRequestTooLargeError(
                f"a ZooKeeper transaction of {len(self._ops)} ops would encode to about {self.size_bytes} "
                f"bytes, more than the {REQUEST_MAX_BYTES} bytes Odradek sends in one request "
                f"(first op: {self._ops[0]}); not sent"
            )
        return self._tx.commit_async()

    def commit(self) -> list[Any]:
        return self.outcome(self.commit_async().get())

    def outcome(self, results: list[Any]) -> list[Any]:
        """Interprets the raw results of `commit_async()`: raises the first failing op's exception,
        else returns the results."""
        for op, result in zip(self._ops, results, strict=True):
            if isinstance(result, Exception) and not isinstance(
                result, RolledBackError | RuntimeInconsistency
            ):
                result.add_note(f"transaction op failed: {op}")
                raise result
        return results


class FencedTransaction(ZkTransaction):
    """A transaction that applies only while `/controller_epoch` is at `epoch_zk_version`.
    `commit()` returns the results of the ops added after the epoch check."""

    def __init__(self, zk: KazooClient, epoch_zk_version: int):
        if epoch_zk_version < 0:
            raise ValueError(f"an epoch zk version is never negative, got {epoch_zk_version}")
        super().__init__(zk)
        self.epoch_zk_version = epoch_zk_version
        self.check(CONTROLLER_EPOCH_PATH, epoch_zk_version)

    def outcome(self, results: list[Any]) -> list[Any]:
        if isinstance(results[0], BadVersionError):
            raise ControllerMovedError(
                f"controller epoch zk version check failed: expected version {self.epoch_zk_version} of "
                f"{CONTROLLER_EPOCH_PATH}; another controller has been elected since"
            )
        return super().outcome(results)[1:]
