"""Bounds on what Odradek sends ZooKeeper in one request, and the packing of large writes into
several multis that respect them.

ZooKeeper drops a connection whose request exceeds `jute.maxbuffer` (1 MiB by default): the
client sees a connection loss, and a writer that retries sends the same request again forever.
So nothing Odradek writes comes near it:

    MULTI_MAX_BYTES      256 KiB   the target size of one multi built by `pack`
    MULTI_MAX_OPS        1000      the most ops in one multi built by `pack`
    ZNODE_MAX_BYTES      512 KiB   the most data one znode may hold (a request whose znode would
                                   exceed it is refused up front: INVALID_REQUEST)
    REQUEST_MAX_BYTES    768 KiB   the most any one request may encode to; a transaction that
                                   would exceed it raises `ZkRequestTooLargeError` without being sent

Sizes are those of ZooKeeper's jute encoding: per op a multi header (type, done, err), the
length-prefixed path and data, a version or the create's flags and ACL list; `OP_OVERHEAD_BYTES`
bounds everything but the path and the data from above (the open ACL takes 27 bytes of it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from services.common.errors import Errors, KafkaError

JUTE_MAX_BUFFER_BYTES = 1024 * 1024
MULTI_MAX_BYTES = 256 * 1024
MULTI_MAX_OPS = 1000
ZNODE_MAX_BYTES = 512 * 1024
REQUEST_MAX_BYTES = 768 * 1024
OP_OVERHEAD_BYTES = 64
REQUEST_OVERHEAD_BYTES = 32

T = TypeVar("T")


class ZkRequestTooLargeError(KafkaError):
    """A write whose request would come near `jute.maxbuffer`; it was not sent."""

    error = Errors.INVALID_REQUEST


def op_bytes(path: str, data: bytes = b"") -> int:
    """An upper bound of one op's encoded size in a multi (create, set, delete or check)."""
    return OP_OVERHEAD_BYTES + len(path.encode("utf-8")) + len(data)


def check_znode_size(path: str, data: bytes) -> None:
    """INVALID_REQUEST (`ZkRequestTooLargeError`) if `data` is too large for one znode."""
    if len(data) > ZNODE_MAX_BYTES:
        raise ZkRequestTooLargeError(
            f"{path} would hold {len(data)} bytes, more than the {ZNODE_MAX_BYTES} bytes a znode may hold "
            f"(ZooKeeper's jute.maxbuffer is {JUTE_MAX_BUFFER_BYTES} bytes)"
        )


@dataclass(frozen=True, slots=True)
class Group(Generic[T]):
    """Ops that must be written in the same multi (`size_bytes` from `op_bytes`), and what they
    are for."""

    item: T
    ops: int
    size_bytes: int


def pack(
    groups: Iterable[Group[T]],
    *,
    reserved_ops: int = 1,
    reserved_bytes: int = OP_OVERHEAD_BYTES + 32,
    max_ops: int = MULTI_MAX_OPS,
    max_bytes: int = MULTI_MAX_BYTES,
) -> list[list[T]]:
    """The groups' items in order, split into consecutive chunks each of which fits one multi of
    at most `max_ops` ops and `max_bytes` bytes, counting `reserved_*` for the ops every multi
    also carries (the controller-epoch check). A group larger than a whole multi gets a chunk of its
    own (the transaction's own guard then refuses it if it exceeds REQUEST_MAX_BYTES)."""
    chunks: list[list[T]] = []
    current: list[T] = []
    ops, size = reserved_ops, REQUEST_OVERHEAD_BYTES + reserved_bytes
    for group in groups:
        if current and (ops + group.ops > max_ops or size + group.size_bytes > max_bytes):
            chunks.append(current)
            current = []
            ops, size = reserved_ops, REQUEST_OVERHEAD_BYTES + reserved_bytes
        current.append(group.item)
        ops += group.ops
        size += group.size_bytes
    if current:
        chunks.append(current)
    return chunks
