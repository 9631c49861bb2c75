"""The Consumer's fetches in fetch sessions (KIP-227) against a fake broker keeping one: a fetch
names only the partitions whose position moved, and a session the broker lost or whose epoch it
refused is opened again by a full fetch, with no error for the user."""

from __future__ import annotations

import pytest

from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.devcluster.proc import wait_until
from tests.unit.clients.consumer.test_consumer import TP, FakeLog, consumer_for, poll_values, serve


class SessionLog(FakeLog):
    """A FakeLog behind one fetch session: fetches name what changed, answers hold only the
    partitions with records, an error or a high watermark not answered yet."""

    def __init__(self, epoch: int = 1):
        super().__init__(epoch)
        self.session_id = 0
        self.next_epoch = 0
        self.session: dict[tuple[str, int], broker_pb2.FetchRequest.FetchPartition] = {}
        self.answered: dict[tuple[str, int], int] = {}  # the high watermark last answered

    def fetch(self, request, context):
        full = request.session_epoch <= 0
        if full:
            self.session_id, self.next_epoch = self.session_id + 1, 1
            self.session, self.answered = {}, {}
        elif request.session_id != self.session_id:
            return broker_pb2.FetchResponse(error_code=Errors.FETCH_SESSION_ID_NOT_FOUND)
        elif request.session_epoch != self.next_epoch:
            return broker_pb2.FetchResponse(error_code=Errors.INVALID_FETCH_SESSION_EPOCH)
        else:
            self.next_epoch += 1
        for topic in request.forgotten_topics_data:
            for index in topic.partitions:
                del self.session[(topic.topic, index)]
        for topic in request.topics:
            for p in topic.partitions:
                self.session[(topic.topic, p.partition)] = p
        everything = broker_pb2.FetchRequest()
        for (topic, _index), p in self.session.items():
            everything.topics.add(topic=topic, partitions=[p])
        response = broker_pb2.FetchResponse(session_id=self.session_id)
        for topic in super().fetch(everything, context).responses:
            for p in topic.partitions:
                key = (topic.topic, p.partition_index)
                if full or p.records or p.error_code or self.answered.get(key) != p.high_watermark:
                    self.answered[key] = p.high_watermark
                    response.responses.add(topic=topic.topic, partitions=[p])
        return response


def idle_fetches(consumer, node, count: int) -> None:
    """Polls (getting no records) until the broker has had `count` fetches."""
    def fetched() -> bool:
        assert list(consumer.poll(timeout_ms=20)) == []
        return len(node.requests("Fetch")) >= count

    wait_until(fetched, 5, 0)


def named_offsets(request: broker_pb2.FetchRequest) -> list[int]:
    return [p.fetch_offset for topic in request.topics for p in topic.partitions]


def test_fetches_name_only_the_partitions_whose_position_moved(fake_nodes):
    (node,) = fake_nodes(1)
    log = SessionLog()
    log.append(b"a", b"b", b"c")
    serve(node, log, [node], node)
    with consumer_for([node]) as consumer:
        consumer.assign([TP])
        assert poll_values(consumer, 3) == [b"a", b"b", b"c"]
        idle_fetches(consumer, node, 5)
        log.append(b"d")
        assert poll_values(consumer, 1) == [b"d"]
        idle_fetches(consumer, node, len(node.requests("Fetch")) + 2)
    requests = node.requests("Fetch")
    assert (requests[0].session_id, requests[0].session_epoch, named_offsets(requests[0])) == (0, 0, [0])
    assert [(r.session_id, r.session_epoch) for r in requests[1:]] == [(1, n) for n in range(1, len(requests))]
    assert [named_offsets(r) for r in requests if named_offsets(r)] == [[0], [3], [4]]
    assert not any(r.forgotten_topics_data for r in requests)


@pytest.mark.parametrize(("lost", "reopened"), [("session_id", (0, 0)), ("next_epoch", (1, 0))])
def test_a_session_the_broker_lost_or_refused_is_opened_again_without_an_error(fake_nodes, lost, reopened):
    (node,) = fake_nodes(1)
    log = SessionLog()
    log.append(b"a")
    serve(node, log, [node], node)
    with consumer_for([node], retry_backoff_ms=60000) as consumer:  # a backoff would outlast the test
        consumer.assign([TP])
        assert poll_values(consumer, 1) == [b"a"]
        idle_fetches(consumer, node, 3)
        setattr(log, lost, 50)  # the broker evicted the session, or expects another epoch
        log.append(b"b")
        assert poll_values(consumer, 1, timeout_s=5) == [b"b"]
    sessions = [(r.session_id, r.session_epoch, named_offsets(r)) for r in node.requests("Fetch")]
    assert (*reopened, [1]) in sessions[1:]


def test_a_broker_without_sessions_gets_full_fetches_asking_for_one(fake_nodes):
    (node,) = fake_nodes(1)
    log = FakeLog()
    log.append(b"a", b"b")
    serve(node, log, [node], node)
    with consumer_for([node]) as consumer:
        consumer.assign([TP])
        assert poll_values(consumer, 2) == [b"a", b"b"]
        idle_fetches(consumer, node, 3)
    requests = node.requests("Fetch")
    assert {(r.session_id, r.session_epoch, r.HasField("session_epoch")) for r in requests} == {(0, 0, True)}
    assert all(len(named_offsets(r)) == 1 for r in requests)
