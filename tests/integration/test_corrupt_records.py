"""Consumers meeting a batch that went corrupt on a running broker's disk (as an old log written
before the broker validated records can hold): bytes inside the record area of a batch in the
middle of the active segment are overwritten, so its CRC no longer matches; the broker serves the
bytes as they are. The Consumer returns the records before it, then raises CorruptRecordError
naming topic, partition and offset until a seek moves past it; `odradek console-consumer` stops
there with an error, or with --skip-message-on-error reports it and prints the rest (as a group
member too, whose commits then go past it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.broker.log.files import LOG_FILE_SUFFIX, filename_prefix
from services.clients import cli
from services.clients.admin import Admin
from services.clients.consumer import Consumer
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.records.batch import iter_batch_positions, parse_header
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, create_topic, module_cluster, produce_values
from tests.unit.clients.consumer.test_consumer import poll_values
from tests.unit.clients.consumer.test_corrupt_fetch import poll_until_corrupt

TOPIC = "corrupt"
TP = TopicPartition(TOPIC, 0)
VALUES = [b"value-%d" % offset for offset in range(5)]
BAD_OFFSET = 2
CONSUMER_CONFIG = {**CLIENT_CONFIG, "fetch_max_wait_ms": 50, "auto_offset_reset": "earliest"}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    """One controller, one broker and one group coordinator for the whole module."""
    with module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "corrupt", brokers=1,
                        controllers=1, coordinators=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def corrupted(cluster: LocalCluster, admin: Admin, writer: LowLevelClient) -> None:
    """Partition TOPIC-0 holds VALUES, one batch each, and the batch at BAD_OFFSET has three value
    bytes overwritten in the running broker's active segment file."""
    create_topic(admin, TOPIC)
    for value in VALUES:
        produce_values(writer, TOPIC, 0, [value])
    segment = cluster.data_dir(cluster.broker_names[0]) / f"{TOPIC}-0" / (filename_prefix(0) + LOG_FILE_SUFFIX)

    def batch_positions() -> dict[int, tuple[int, int]] | None:
        """Base offset -> (position, size) of each batch in the segment, once all are there."""
        data = segment.read_bytes() if segment.exists() else b""
        found = {parse_header(data, pos).base_offset: (pos, size) for pos, size in iter_batch_positions(data)}
        return found if len(found) == len(VALUES) else None

    positions = wait_until(batch_positions, 15, message="every batch in the active segment")
    pos, size = positions[BAD_OFFSET]
    with open(segment, "r+b") as file:  # the last bytes of the record area: the value
        file.seek(pos + size - 4)
        file.write(b"\xff\xfe\xfd")


def test_the_consumer_raises_at_the_corrupt_batch_and_goes_on_after_a_seek(cluster: LocalCluster, corrupted):
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CONSUMER_CONFIG) as consumer:
        consumer.assign([TP])
        values: list[bytes] = []
        error = poll_until_corrupt(consumer, values)
        assert values == VALUES[:BAD_OFFSET]
        assert (error.topic, error.partition, error.offset, error.code) == (TOPIC, 0, BAD_OFFSET,
                                                                             Errors.CORRUPT_MESSAGE)
        assert "CRC" in str(error) and f"partition {TP} at offset {BAD_OFFSET}" in str(error)
        assert poll_until_corrupt(consumer, values).offset == BAD_OFFSET  # again, nothing lost
        assert values == VALUES[:BAD_OFFSET] and consumer.position(TP) == BAD_OFFSET
        consumer.seek(TP, error.offset + 1)
        assert poll_values(consumer, 2, 30) == VALUES[BAD_OFFSET + 1:]


def console_consumer(cluster: LocalCluster, capsys, *flags: str) -> tuple[int, list[str], str]:
    """Runs the tool on TOPIC (on partition 0 from the earliest offset unless `flags` name a group)."""
    where = flags if "--group" in flags else ("--partition", "0", "--offset", "earliest", *flags)
    status = cli.main(["console-consumer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", TOPIC,
                       "--timeout-ms", "3000", *where])
    captured = capsys.readouterr()
    return status, captured.out.split(), captured.err


def test_the_console_consumer_stops_at_the_corrupt_batch(cluster: LocalCluster, corrupted, capsys):
    status, printed, err = console_consumer(cluster, capsys)
    assert status != 0 and printed == [value.decode() for value in VALUES[:BAD_OFFSET]]
    assert "CORRUPT_MESSAGE" in err and f"partition {TP} at offset {BAD_OFFSET}" in err
    assert f"Processed a total of {BAD_OFFSET} messages" in err


def test_the_console_consumer_skips_the_corrupt_batch_when_asked(cluster: LocalCluster, corrupted, capsys):
    status, printed, err = console_consumer(cluster, capsys, "--skip-message-on-error")
    assert status == 0
    assert printed == [value.decode() for i, value in enumerate(VALUES) if i != BAD_OFFSET]
    assert f"Skipping corrupt record at offset {BAD_OFFSET} of partition {TP}" in err
    assert f"Processed a total of {len(VALUES) - 1} messages" in err


def test_a_group_member_skips_the_corrupt_batch_and_commits_past_it(cluster: LocalCluster, corrupted, capsys):
    flags = ("--group", "skipping", "--from-beginning", "--skip-message-on-error")
    status, printed, err = console_consumer(cluster, capsys, *flags)
    assert status == 0
    assert printed == [value.decode() for i, value in enumerate(VALUES) if i != BAD_OFFSET]
    assert f"Skipping corrupt record at offset {BAD_OFFSET} of partition {TP}" in err
    status, printed, err = console_consumer(cluster, capsys, *flags)  # the group goes on after the last record
    assert (status, printed) == (0, []) and "Skipping" not in err
