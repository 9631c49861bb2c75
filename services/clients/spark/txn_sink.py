"""The exactly-once streaming sink's I/O (`exactlyOnce=true`; decisions in `exactly_once`).

Tasks write straight to the brokers with a transactional `Producer` (the gateway has no
transactions): its bootstrap servers are the brokers the gateway lists
(`GET /v3/clusters/<id>/brokers`, asked by the driver when the query is planned). A task's
`TransactionalTaskWriter` inits the transactional id of its partition (fencing an earlier attempt
and aborting what it left open), sends every row in one transaction and prepares it
(`Producer.prepare_transaction`), which goes back to the driver in the task's commit message.

On the driver `BatchCommitter` keeps the `BatchLog` in the checkpoint location (a path, or the URI
of a Hadoop-compatible filesystem: where Spark keeps the query's checkpoint) and ends the
transactions with `Admin.end_transaction`. `recover()` runs whenever the sink is created on the
driver (before the tasks of a batch are planned) and at each commit: it rolls forward a recorded
batch that is not marked committed, so that no task's `init_transactions` aborts it. After a
commit it aborts the query's transactions left open by earlier attempts (`exactly_once.leftovers`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from services.clients.admin import Admin
from services.clients.admin_types import PreparedTransaction
from services.clients.producer import Producer
from services.clients.spark.batch_log import BatchLog, local_path
from services.clients.spark.exactly_once import (
    default_prefix,
    leftovers,
    plan_abort,
    plan_commit,
    prepared_of,
    recovery,
    transactional_id,
)
from services.clients.spark.gateway import GatewayClient
from services.clients.spark.options import InvalidOptionError
from services.common.errors import KafkaError

if TYPE_CHECKING:
    from services.clients.spark.writer import WriteOptions

logger = logging.getLogger(__name__)

ONGOING = "Ongoing"  # the state ListTransactions names an open transaction by


@dataclass(frozen=True)
class TransactionalSettings:
    """What the tasks and the driver need (picklable)."""

    bootstrap_servers: tuple[str, ...]
    transactional_id_prefix: str
    transaction_timeout_ms: int
    checkpoint_location: str  # an absolute path, or a URI (`batch_log`)
    timeout_ms: int
    client_settings: tuple[tuple[str, str], ...] = ()  # Kafka's client security settings


def broker_addresses(gateway_urls: Sequence[str], timeout_s: float, authorization: str | None = None
                     ) -> tuple[str, ...]:
    """`host:port` of every live broker, as the gateway lists them."""
    with GatewayClient(list(gateway_urls), timeout_s, authorization=authorization) as client:
        brokers = client.get_json(client.cluster_path("/brokers"))["data"]
    return tuple(f"{broker['host']}:{broker['port']}" for broker in brokers)


def transactional_settings(options: WriteOptions) -> TransactionalSettings:
    """The settings of an `exactlyOnce` sink (on the driver: asks the gateway for the brokers)."""
    if not options.checkpoint_location:
        raise InvalidOptionError("Option 'exactlyOnce' keeps batch records in the query's checkpoint location: "
                                 "give the query a checkpointLocation.")
    local = local_path(options.checkpoint_location)
    location = str(local.absolute()) if local is not None else options.checkpoint_location
    prefix = options.transactional_id_prefix or default_prefix(location)
    return TransactionalSettings(broker_addresses(options.gateway_urls, options.timeout_ms / 1000,
                                                  options.authorization), prefix,
                                 options.transaction_timeout_ms, location, options.timeout_ms,
                                 options.client_settings)


def task_partition_id() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class TransactionalTaskWriter:
    """One task's rows, in one transaction prepared for the driver to end."""

    def __init__(self, settings: TransactionalSettings, topic_option: str | None) -> None:
        self.settings = settings
        self.topic_option = topic_option

    def write(self, batches: Iterable[pa.RecordBatch]) -> tuple[dict[tuple[str, int], int], PreparedTransaction]:
        """(records sent per (topic, partition), the prepared transaction)."""
        settings = self.settings
        tid = transactional_id(settings.transactional_id_prefix, task_partition_id())
        counts: Counter[tuple[str, int]] = Counter()

        def count(metadata, error) -> None:
            if error is None:
                counts[(metadata.topic, metadata.partition)] += 1

        with Producer(dict(settings.client_settings), bootstrap_servers=",".join(settings.bootstrap_servers),
                      transactional_id=tid,
                      transaction_timeout_ms=settings.transaction_timeout_ms, max_block_ms=settings.timeout_ms,
                      acks="all", linger_ms=5) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            for batch in batches:
                self._send(producer, batch, count)
            prepared = producer.prepare_transaction()
        return dict(counts), prepared

    def _send(self, producer: Producer, batch: pa.RecordBatch, callback: Callable[[Any, Any], None]) -> None:
        columns = batch.to_pydict()
        rows = batch.num_rows
        topics = [self.topic_option] * rows if self.topic_option is not None else columns["topic"]
        keys = columns.get("key", [None] * rows)
        partitions = columns.get("partition", [None] * rows)
        headers = columns.get("headers", [None] * rows)
        for topic, key, value, partition, pairs in zip(topics, keys, columns["value"], partitions, headers,
                                                       strict=True):
            if topic is None:
                raise ValueError("Null topic present in the data. Use the topic option for setting a topic.")
            producer.send(topic, value, key=key, partition=partition, callback=callback,
                          headers=[(pair["key"], pair["value"]) for pair in pairs] if pairs else None)


class BatchCommitter:
    """The driver's ending of each micro-batch's transactions."""

    def __init__(self, settings: TransactionalSettings) -> None:
        self.settings = settings
        self.log = BatchLog(settings.checkpoint_location)

    def _admin(self) -> Admin:
        return Admin(dict(self.settings.client_settings),
                     bootstrap_servers=",".join(self.settings.bootstrap_servers),
                     default_api_timeout_ms=self.settings.timeout_ms)

    def recover(self) -> None:
        """Rolls forward the latest recorded batch when it is not marked committed."""
        latest = self.log.latest()
        if latest is None or latest.committed:
            return
        pending = recovery(latest)
        logger.warning("odradek: rolling forward the %d transaction(s) of recorded batch %d", len(pending),
                       latest.batch_id)
        with self._admin() as admin:
            self._end(admin, pending, commit=True)
        self.log.write(replace(latest, committed=True))

    def commit(self, transactions: Iterable[PreparedTransaction | None], batch_id: int) -> None:
        self.recover()
        plan = plan_commit(batch_id, prepared_of(transactions), self.log.latest())
        if plan.record is not None:
            self.log.write(plan.record)
        with self._admin() as admin:
            self._end(admin, plan.commit, commit=True)
            if plan.abort:
                logger.warning("odradek: batch %d was committed before: aborting the %d transaction(s) of its "
                               "replay", batch_id, len(plan.abort))
            self._end(admin, plan.abort, commit=False)
        if plan.finished is not None:
            self.log.write(plan.finished)
            with self._admin() as admin:
                self._abort_leftovers(admin, plan.commit)

    def _abort_leftovers(self, admin: Admin, batch: Iterable[PreparedTransaction]) -> None:
        """Aborts the query's open transactions that `batch` does not hold; a failure is only logged
        (what is left open is aborted by its id's next init or by the transaction timeout)."""
        try:
            listed = [listing.transactional_id for listing in admin.list_transactions(states=[ONGOING])]
            for tid in leftovers(listed, self.settings.transactional_id_prefix, batch):
                found = admin.describe_transactions([tid])[tid]
                if found.state == ONGOING:
                    logger.warning("odradek: aborting transaction %s left open by an earlier attempt", tid)
                    admin.end_transaction(PreparedTransaction(tid, found.producer_id, found.producer_epoch),
                                          commit=False)
        except KafkaError as error:
            logger.warning("odradek: could not abort the transactions left open by earlier attempts: %s", error)

    def abort(self, transactions: Iterable[PreparedTransaction | None], batch_id: int) -> None:
        prepared = plan_abort(batch_id, prepared_of(transactions), self.log.latest())
        if prepared:
            with self._admin() as admin:
                self._end(admin, prepared, commit=False)

    @staticmethod
    def _end(admin: Admin, transactions: Iterable[PreparedTransaction], *, commit: bool) -> None:
        for txn in transactions:
            admin.end_transaction(txn, commit=commit)
