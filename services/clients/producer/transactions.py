"""The transactional producer's coordinator calls (the I/O half of Kafka's TransactionManager).

`TransactionCalls` finds the transaction coordinator of the producer's `transactional.id`
(FindCoordinator, key type TRANSACTION, through any broker) and a group's coordinator, and sends
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn to them. Each
call is blocking: `call` repeats it until the answer is final, sorted by
`transaction_manager.action_for` (find the coordinator again, or retry after `retry.backoff.ms`),
within the caller's deadline (`max.block.ms`), and then raises KafkaTimeoutError. A final error
moves the manager to ABORTABLE_ERROR or FATAL_ERROR and is raised. `add_partitions` is the
sender thread's single attempt per round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from services.clients.cluster import Node
from services.clients.consumer.errors import CommitFailedError
from services.clients.group_requests import (
    GROUP_KEY,
    TRANSACTION_KEY,
    find_coordinator_request,
    parse_find_coordinator,
)
from services.clients.metadata import Metadata
from services.clients.producer.errors import KafkaTimeoutError
from services.clients.producer.transaction_manager import (
    Action,
    TransactionManager,
    action_for,
    add_partitions_code,
    coordinator_error,
)
from services.clients.transport import COORDINATOR, ChannelPool, Deadline, call_any_node
from services.clients.txn_requests import (
    add_offsets_request,
    add_partitions_codes,
    add_partitions_request,
    answer_code,
    end_txn_request,
    init_producer_id_request,
    txn_offset_commit_code,
    txn_offset_commit_request,
)
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

COMMIT_FAILED_CODES = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION, Errors.FENCED_INSTANCE_ID,
                                 Errors.REBALANCE_IN_PROGRESS})


class TransactionCalls:
    """Blocking calls to the transaction and group coordinators; see the module docstring."""

    def __init__(self, manager: TransactionManager, metadata: Metadata, pool: ChannelPool, *,
                 request_timeout_ms: int, retry_backoff_ms: int):
        self.manager = manager
        self._metadata = metadata
        self._pool = pool
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._coordinators: dict[tuple[int, str], Node] = {}

    # ------------------------------------------------------------------ coordinators

    def _coordinator(self, key_type: int, key: str, deadline: Deadline) -> Node:
        node = self._coordinators.get((key_type, key))
        if node is None:
            self._metadata.maybe_refresh(self._pool, max(1, deadline.remaining_ms()))
            response = call_any_node(self._metadata, self._pool, "FindCoordinator",
                                     find_coordinator_request(key, key_type), deadline)
            kind = "transactional id" if key_type == TRANSACTION_KEY else "group"
            node = parse_find_coordinator(response, key, kind)
            self._coordinators[(key_type, key)] = node
        return node

    def _attempt(self, key_type: int, key: str, method: str, request: Any, read: Callable[[Any], tuple[int, str]],
                 deadline: Deadline) -> tuple[int, str, Any]:
        """One try: (code, message, answer); a failed lookup or call becomes its error's code."""
        try:
            node = self._coordinator(key_type, key, deadline)
            timeout_ms = max(1, deadline.bound(self._request_timeout_ms))
            response = self._pool.call(node.address, COORDINATOR, method, request, timeout_ms)
        except KafkaError as error:
            code = Errors.NETWORK_EXCEPTION if error.code == Errors.REQUEST_TIMED_OUT else error.code
            return code, str(error), None
        code, message = read(response)
        return code, message, response

    def call(self, method: str, request: Any, read: Callable[[Any], tuple[int, str]], deadline: Deadline, *,
             key_type: int = TRANSACTION_KEY, key: str | None = None) -> Any:
        """Sends `method` until its answer is final; returns the answer or raises (see the module
        docstring)."""
        key = self.manager.transactional_id if key is None else key
        attempts = 0
        while True:
            attempts += 1
            code, message, response = self._attempt(key_type, key, method, request, read, deadline)
            action = action_for(code)
            if action is Action.OK:
                return response
            if action in (Action.ABORTABLE, Action.FATAL):
                raise self.manager.fail_for(action, self._error(key_type, code, message or method))
            if action is Action.FIND_COORDINATOR:
                self._coordinators.pop((key_type, key), None)
            logger.debug("%s answered %s, retrying", method, error_for_code(code).name)
            if deadline.expired:
                raise KafkaTimeoutError(f"{method} for transactional id {self.manager.transactional_id} did not "
                                        f"complete within the time allowed ({attempts} attempt(s), last answer "
                                        f"{message or code})")
            deadline.clock.sleep_ms(min(self._retry_backoff_ms, deadline.remaining_ms()))

    @staticmethod
    def _error(key_type: int, code: int, message: str) -> KafkaError:
        if key_type == GROUP_KEY and code in COMMIT_FAILED_CODES:
            return CommitFailedError(error=Errors(code))
        return coordinator_error(code, message)

    # ------------------------------------------------------------------ the calls

    def init_producer_id(self, deadline: Deadline, bump: bool = False) -> tuple[int, int]:
        """(producer id, epoch) for the transactional id; `bump` passes the current ones (KIP-360)."""
        manager = self.manager
        producer_id, epoch = (manager.producer_id, manager.producer_epoch) if bump else (-1, -1)
        request = init_producer_id_request(manager.transactional_id, manager.transaction_timeout_ms, producer_id,
                                           epoch)
        answer = self.call("InitProducerId", request, answer_code, deadline)
        return answer.producer_id, answer.producer_epoch

    def add_partitions(self, partitions: list[TopicPartition], deadline: Deadline) -> int:
        """One AddPartitionsToTxn for `partitions` (the sender's); records them when added. Returns
        the ms to wait before trying again, 0 when the answer was final."""
        manager = self.manager
        request = add_partitions_request(manager.transactional_id, manager.producer_id, manager.producer_epoch,
                                         partitions)
        code, message, response = self._attempt(
            TRANSACTION_KEY, manager.transactional_id, "AddPartitionsToTxn", request,
            lambda answer: (add_partitions_code(add_partitions_codes(answer, partitions).values()),
                            answer.error_message), deadline)
        action = action_for(code)
        if action is Action.OK:
            manager.partitions_added(partitions)
        elif action is Action.FIND_COORDINATOR:
            self._coordinators.pop((TRANSACTION_KEY, manager.transactional_id), None)
        elif action in (Action.ABORTABLE, Action.FATAL):
            detail = message or f"adding {', '.join(map(str, partitions))} to the transaction failed"
            manager.fail_for(action, coordinator_error(code, detail))
        if action in (Action.RETRY, Action.FIND_COORDINATOR):
            return manager.add_partitions_backoff_ms(code, self._retry_backoff_ms)
        return 0

    def add_offsets(self, group_id: str, deadline: Deadline) -> None:
        manager = self.manager
        request = add_offsets_request(manager.transactional_id, manager.producer_id, manager.producer_epoch,
                                      group_id)
        self.call("AddOffsetsToTxn", request, answer_code, deadline)
        manager.offsets_added()

    def txn_offset_commit(self, group, offsets: Mapping, deadline: Deadline) -> None:
        manager = self.manager
        request = txn_offset_commit_request(manager.transactional_id, manager.producer_id, manager.producer_epoch,
                                            group, offsets)
        self.call("TxnOffsetCommit", request, lambda answer: (txn_offset_commit_code(answer), answer.error_message),
                  deadline, key_type=GROUP_KEY, key=group.group_id)

    def end_txn(self, commit: bool, deadline: Deadline, bump_epoch: bool = False) -> int:
        """Commits or aborts; returns the epoch the coordinator answered (the next one after an
        abort with `bump_epoch`, unless the coordinator could not bump it)."""
        manager = self.manager
        request = end_txn_request(manager.transactional_id, manager.producer_id, manager.producer_epoch, commit,
                                  bump_epoch)
        return self.call("EndTxn", request, answer_code, deadline).producer_epoch
