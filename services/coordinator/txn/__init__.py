"""The transaction coordinator: transactional ids, producer ids and epochs, and the two-phase end
of transactions (Kafka 2.8's TransactionCoordinator and TransactionStateManager), over the
`__transaction_state` records.

`TransactionCoordinatorCore` (coordinator.py) is the pure core: commands in, `TxnOutcome`s out
(records to append, markers to write, responses), state changed by applying records.
`TransactionCoordinator` (runtime.py) runs it for the service with a lock, a `Scheduler`, the
store and a `MarkerWriter`.
"""
