"""Producer id blocks: `/latest_producer_id_block` (persistent).

Holds the last block of producer ids handed out, version 1, with ids as decimal strings:

    {"version":1,"broker":2,"block_start":"1000","block_end":"1999"}

`broker` is the id of the allocating process (a coordinator). The znode starts empty. An allocator
reads it with its data version, takes the next `PRODUCER_ID_BLOCK_SIZE` ids after `block_end` (or
0..999 when empty) and writes that block conditionally on the version read, retrying on a
conflict, so two allocators never get overlapping blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.zk.codec import as_int, dumps, loads_object
from services.common.zk.codec import field as required

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids `block_start..block_end`, both inclusive, owned by `broker_id`."""

    broker_id: int
    block_start: int
    block_end: int

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1


class ProducerIdsExhaustedError(RuntimeError):
    pass


def next_block(
    latest: ProducerIdBlock | None, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
) -> ProducerIdBlock:
    """The block after `latest` (the first block when there is none yet)."""
    start = 0 if latest is None else latest.block_end + 1
    if start + size - 1 > MAX_PRODUCER_ID:
        raise ProducerIdsExhaustedError(f"no producer ids left after {latest}")
    return ProducerIdBlock(broker_id, start, start + size - 1)


def encode_block(block: ProducerIdBlock) -> bytes:
    return dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_block(data: bytes | None) -> ProducerIdBlock | None:
    """The latest block, or None while the znode is still empty."""
    if not data:
        return None
    what = PRODUCER_ID_BLOCK_PATH
    obj = loads_object(data, what)
    return ProducerIdBlock(
        broker_id=as_int(required(obj, "broker", what), what),
        block_start=as_int(required(obj, "block_start", what), what),
        block_end=as_int(required(obj, "block_end", what), what),
    )
