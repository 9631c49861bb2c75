"""The exactly-once sink's decisions (pure) and its batch records: what a commit records, commits and
aborts for a new batch and a replay, what a restarted driver rolls forward, and the record files."""

from __future__ import annotations

import base64

import pyarrow.fs as pafs
import pytest

from services.clients.admin_types import PreparedTransaction
from services.clients.spark.batch_log import (
    KEEP_RECORDS,
    BatchLog,
    decode,
    encode,
    filesystem_of,
    local_path,
    pyarrow_uri,
)
from services.clients.spark.exactly_once import (
    BatchRecord,
    default_prefix,
    leftovers,
    plan_abort,
    plan_commit,
    prepared_of,
    recovery,
    transactional_id,
)
from services.clients.spark.options import InvalidOptionError
from services.clients.spark.writer import write_options
from services.common.topic_partition import TopicPartition


def txn(task: int, epoch: int, *partitions: int) -> PreparedTransaction:
    return PreparedTransaction(transactional_id("q", task), 1000 + task, epoch,
                               frozenset(TopicPartition("out", p) for p in partitions))


def test_a_new_batch_is_recorded_then_committed_then_marked_committed() -> None:
    prepared = (txn(0, 1, 0), txn(1, 1, 1, 2))
    plan = plan_commit(5, prepared, BatchRecord(4, (txn(0, 0, 0),), committed=True))
    assert plan.record == BatchRecord(5, prepared, committed=False)
    assert plan.commit == prepared and plan.abort == ()
    assert plan.finished == BatchRecord(5, prepared, committed=True)
    assert plan_commit(0, prepared, None).record == BatchRecord(0, prepared)


def test_a_replayed_batch_aborts_the_replay_and_records_nothing() -> None:
    replay = (txn(0, 2, 0), txn(1, 2, 1))
    for latest in (BatchRecord(5, (txn(0, 1, 0),), committed=True), BatchRecord(6, (), committed=True)):
        plan = plan_commit(5, replay, latest)
        assert plan.record is None and plan.finished is None
        assert plan.commit == () and plan.abort == replay


def test_an_abort_after_a_failed_commit_spares_the_recorded_transactions() -> None:
    """Spark aborts a batch whose commit raised: what the record holds is decided and rolled forward."""
    prepared = (txn(0, 1, 0), txn(1, 1, 1))
    assert plan_abort(5, prepared, None) == prepared
    assert plan_abort(5, prepared, BatchRecord(4, prepared, committed=True)) == prepared
    assert plan_abort(5, prepared, BatchRecord(5, prepared)) == ()
    replay = (txn(0, 2, 0), txn(1, 2, 1))
    assert plan_abort(5, replay, BatchRecord(5, prepared, committed=True)) == replay


def test_tasks_that_wrote_nothing_have_no_transaction_to_end() -> None:
    assert prepared_of([txn(0, 1), None, txn(1, 1, 3)]) == (txn(1, 1, 3),)
    plan = plan_commit(3, prepared_of([txn(0, 1)]), None)
    assert plan.record == BatchRecord(3, ()) and plan.commit == ()


def test_a_restart_rolls_forward_only_a_recorded_batch_not_marked_committed() -> None:
    recorded = (txn(0, 1, 0), txn(1, 1, 1))
    assert recovery(None) == ()
    assert recovery(BatchRecord(7, recorded, committed=True)) == ()
    assert recovery(BatchRecord(7, recorded, committed=False)) == recorded


def test_transactional_ids_are_stable_per_checkpoint_and_task() -> None:
    assert default_prefix("/ck/a") == default_prefix("/ck/a") != default_prefix("/ck/b")
    assert default_prefix("/ck/a").startswith("odradek-sink-")
    assert transactional_id(default_prefix("/ck/a"), 3).endswith("-3")


def test_open_transactions_of_the_query_that_the_batch_does_not_hold_are_leftovers() -> None:
    open_ids = ["q-0", "q-1", "q-7", "q-x", "qq-3", "other-2", "q-"]
    assert leftovers(open_ids, "q", [txn(0, 1, 0), txn(1, 1, 1)]) == ["q-7"]
    assert leftovers([], "q", []) == []


def test_batch_records_round_trip_and_only_the_newest_are_kept(tmp_path) -> None:
    log = BatchLog(tmp_path)
    assert log.latest() is None
    record = BatchRecord(2, (txn(0, 1, 0, 1), txn(1, 4, 2)))
    assert decode(encode(record)) == record
    for batch_id in range(KEEP_RECORDS + 5):
        log.write(BatchRecord(batch_id, (txn(0, batch_id, 0),)))
    log.write(BatchRecord(KEEP_RECORDS + 4, (txn(0, 9, 0),), committed=True))
    assert log.latest() == BatchRecord(KEEP_RECORDS + 4, (txn(0, 9, 0),), committed=True)
    assert sorted(path.name for path in log.directory.iterdir()) == sorted(
        f"{n}.json" for n in range(5, KEEP_RECORDS + 5))


def test_checkpoint_locations_must_be_local_paths() -> None:
    assert str(local_path("/tmp/ck")) == "/tmp/ck"
    assert str(local_path("file:///tmp/c%20k")) == "/tmp/c k"
    assert local_path("hdfs://nn/ck") is None


def test_exactly_once_options() -> None:
    base = {"gateway": "http://g:8080", "topic": "out"}
    assert write_options(base).exactly_once is False
    options = write_options({**base, "exactlyonce": "true", "checkpointLocation": "/ck",
                             "transactionalidprefix": "orders", "transactiontimeoutms": "30000"})
    assert (options.exactly_once, options.transactional_id_prefix, options.transaction_timeout_ms,
            options.checkpoint_location) == (True, "orders", 30000, "/ck")
    with pytest.raises(InvalidOptionError, match="checkpointLocation"):
        write_options({**base, "exactlyonce": "true"})
    with pytest.raises(InvalidOptionError, match="true or false"):
        write_options({**base, "exactlyonce": "yes", "checkpointlocation": "/ck"})


def test_exactly_once_takes_kafka_client_security_settings() -> None:
    base = {"gateway": "http://g:8080", "topic": "out", "exactlyonce": "true", "checkpointlocation": "/ck"}
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    options = write_options({**base, "kafka.security.protocol": "SASL_PLAINTEXT",
                             "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": jaas})
    assert dict(options.client_settings) == {"security.protocol": "SASL_PLAINTEXT",
                                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}
    with pytest.raises(InvalidOptionError, match="'kafka.sasl.mechanism': GSSAPI is not supported"):
        write_options({**base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.username": "u",
                       "kafka.sasl.password": "p"})
    with pytest.raises(InvalidOptionError, match="'kafka.ssl.ca.location': only exactlyOnce writes use them"):
        write_options({"gateway": "http://g:8080", "kafka.security.protocol": "SASL_SSL",
                       "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u", "kafka.sasl.password": "p",
                       "kafka.ssl.ca.location": "/ca.pem"})
    # every write authenticates to the gateway as the SASL user
    assert options.authorization == "Basic " + base64.b64encode(b"u:p").decode()
    assert write_options({"gateway": "http://g:8080", "kafka.security.protocol": "SASL_PLAINTEXT",
                          "kafka.sasl.mechanism": "PLAIN", "kafka.sasl.username": "u",
                          "kafka.sasl.password": "p"}).authorization == options.authorization
    assert "Basic" not in repr(options)


def test_batch_records_live_in_a_non_local_checkpoint_through_its_filesystem(tmp_path) -> None:
    log = BatchLog("mock:///checkpoints/query")  # pyarrow's in-memory filesystem, one per BatchLog
    assert log.latest() is None
    for batch_id in range(KEEP_RECORDS + 3):
        log.write(BatchRecord(batch_id, (txn(0, batch_id, 0),)))
    log.write(BatchRecord(KEEP_RECORDS + 2, (txn(0, 7, 0),), committed=True))
    assert log.latest() == BatchRecord(KEEP_RECORDS + 2, (txn(0, 7, 0),), committed=True)
    assert len(log.store.names()) == KEEP_RECORDS

    shared = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    BatchLog("ck", filesystem=shared).write(BatchRecord(3, (txn(0, 1, 0),)))
    assert BatchLog("ck", filesystem=shared).latest() == BatchRecord(3, (txn(0, 1, 0),))
    assert BatchLog(tmp_path / "ck").latest() == BatchRecord(3, (txn(0, 1, 0),))


def test_hadoop_filesystem_names_map_to_pyarrow_ones() -> None:
    assert pyarrow_uri("s3a://bucket/ck/q") == "s3://bucket/ck/q"
    assert pyarrow_uri("hdfs://namenode:8020/ck") == "hdfs://namenode:8020/ck"
    assert filesystem_of("mock:///a/b")[1] == "a/b"
