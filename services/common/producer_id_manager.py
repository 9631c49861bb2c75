"""Producer ids: `ProducerIdManager` (brokers and the transaction coordinator) and the broker's
InitProducerId.

As Kafka 2.8's ProducerIdManager, ids come from blocks of 1000 claimed in ZooKeeper's
`/latest_producer_id_block` (see `services.common.zk.producer_ids`; the claim is a conditional
write, so blocks of different brokers and coordinators never overlap). The first block is claimed
on the first request, the next one when the current block is used up; ids are handed out in
order, under a lock.

InitProducerId without a transactional id is answered by any broker, as Kafka's
TransactionCoordinator answers it: a new producer id with epoch 0, whatever producer id and epoch
the request carries (a producer id of -1 with an epoch other than -1, or the reverse, is
INVALID_REQUEST). A transactional id belongs to the transaction coordinator: an empty one is
INVALID_REQUEST, any other NOT_COORDINATOR. When no block can be claimed the answer is
COORDINATOR_NOT_AVAILABLE, which producers retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from services.common.errors import Errors
from services.common.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from services.common.shared_types import InitProducerIdResult

if TYPE_CHECKING:
    from services.common.zk.producer_ids import ProducerIdBlock

logger = logging.getLogger(__name__)



class ProducerIdManager:
    """Hands out producer ids from blocks that `allocate_block()` claims; thread-safe."""

    def __init__(self, allocate_block: Callable[[], ProducerIdBlock]) -> None:
        self._allocate_block = allocate_block
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next_id = NO_PRODUCER_ID

    @property
    def current_block(self) -> ProducerIdBlock | None:
        return self._block

    def generate_producer_id(self) -> int:
        """The next unused id; claims a new block first when the current one is used up."""
        with self._lock:
            if self._block is None or self._next_id > self._block.block_end:
                block = self._allocate_block()
                logger.info("claimed producer id block %d..%d", block.block_start, block.block_end)
                self._block, self._next_id = block, block.block_start
            producer_id = self._next_id
            self._next_id += 1
            return producer_id

    def init_producer_id(self, transactional_id: str | None, producer_id: int = NO_PRODUCER_ID,
                         producer_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResult:
        """InitProducerId as a broker answers it (see the module doc)."""
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(Errors.INVALID_REQUEST, error_message=(
                f"producer id {producer_id} and epoch {producer_epoch} must both be -1 or neither"))
        if transactional_id is not None:
            if not transactional_id:
                return InitProducerIdResult(Errors.INVALID_REQUEST, error_message="empty transactional id")
            return InitProducerIdResult(Errors.NOT_COORDINATOR, error_message=(
                f"transactional id {transactional_id!r} is served by the transaction coordinator"))
        try:
            return InitProducerIdResult(Errors.NONE, self.generate_producer_id(), 0)
        except Exception as exc:
            logger.warning("cannot claim a producer id block: %s", exc)
            return InitProducerIdResult(Errors.COORDINATOR_NOT_AVAILABLE,
                                        error_message=f"no producer id available: {exc}")
