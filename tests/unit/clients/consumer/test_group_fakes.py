"""Test doubles of the consumer group tests (the test_group_* modules; no tests here).

`FakeGroupCoordinator` implements CoordinatorService for one group, minimally but with the
coordinator's rules: MEMBER_ID_REQUIRED for new dynamic members, a rebalance that completes when
every member has (re)joined or a join timeout drops the missing ones, the leader's SyncGroup
ending it, REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID
answers, LeaveGroup, and offsets stored in memory. `fail(method, code, ...)` queues error answers
and `script(method, handler)` replaces a method. It is served by an in-process gRPC server on
127.0.0.1; a fake broker (tests.unit.clients.support.FakeNode) answers Metadata and
FindCoordinator and serves `FakeLogs`.

`GroupHarness` drives a ConsumerCoordinator directly (heartbeat thread not started, so tests run
its rounds by hand with `heartbeat_round()`), with the same plumbing a Consumer builds.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc

from services.clients.channels import ChannelPool
from services.clients.cluster import TopicPartition
from services.clients.consumer.assignors import assignors_from_config
from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.coordinator import ConsumerCoordinator, GroupRouting
from services.clients.consumer.listener import ConsumerRebalanceListener
from services.clients.consumer.network import AsyncRequests
from services.clients.consumer.protocol import decode_assignment
from services.clients.consumer.subscription import OffsetResetStrategy, SubscriptionState
from services.clients.metadata import Metadata
from services.clients.retry import Deadline
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import code_of
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.proc import wait_until
from services.common.records import build_batch
from tests.unit.clients.support import FakeNode, metadata_response, partition

MEMBER_ID_REQUIRED = code_of("MEMBER_ID_REQUIRED")
UNKNOWN_MEMBER_ID = code_of("UNKNOWN_MEMBER_ID")
ILLEGAL_GENERATION = code_of("ILLEGAL_GENERATION")
REBALANCE_IN_PROGRESS = code_of("REBALANCE_IN_PROGRESS")
FENCED_INSTANCE_ID = code_of("FENCED_INSTANCE_ID")

EMPTY, PREPARING, COMPLETING, STABLE = "Empty", "PreparingRebalance", "CompletingRebalance", "Stable"


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    protocols: list[tuple[str, bytes]]


@dataclass
class FakeGroupCoordinator:
    """One group's coordinator; see the module docstring. `events` records what happened, in order."""

    join_timeout_s: float = 5.0
    lock: threading.Condition = field(default_factory=threading.Condition)
    members: dict[str, Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    static: dict[str, str] = field(default_factory=dict)
    joined: set[str] = field(default_factory=set)
    generation: int = 0
    phase: str = EMPTY
    leader: str | None = None
    protocol: str | None = None
    assignments: dict[str, bytes] = field(default_factory=dict)
    offsets: dict[TopicPartition, tuple[int, int, str]] = field(default_factory=dict)
    errors: dict[str, deque[int]] = field(default_factory=lambda: defaultdict(deque))
    scripted: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # ------------------------------------------------------------------ scripting and inspection

    def fail(self, method: str, *codes: int) -> None:
        with self.lock:
            self.errors[method].extend(codes)

    def script(self, method: str, handler: Callable[[Any], Any]) -> None:
        self.scripted[method] = handler

    def requests(self, method: str) -> list[Any]:
        with self.lock:
            return [request for name, request in self.calls if name == method]

    def start_rebalance(self) -> None:
        """As when a member's metadata changes: every member must rejoin."""
        with self.lock:
            self.phase, self.joined = PREPARING, set()
            self.lock.notify_all()

    def handle(self, method: str, request: Any) -> Any:
        with self.lock:
            self.calls.append((method, request))
            self.events.append((method, getattr(request, "member_id", None)))
            queued = self.errors.get(method)
            code = queued.popleft() if queued else 0
        if method in self.scripted:
            return self.scripted[method](request)
        if code:
            return getattr(pb, f"{method}Response")(error_code=code)
        return getattr(self, method)(request)

    # ------------------------------------------------------------------ membership

    def JoinGroup(self, request: pb.JoinGroupRequest) -> pb.JoinGroupResponse:  # noqa: N802
        instance = request.group_instance_id if request.HasField("group_instance_id") else None
        with self.lock:
            member_id = request.member_id
            if not member_id:
                member_id = f"{request.client_id or 'consumer'}-{next(self._ids)}"
                if instance is None:
                    self.pending.add(member_id)
                    return pb.JoinGroupResponse(error_code=MEMBER_ID_REQUIRED, member_id=member_id)
                fenced = self.static.get(instance)
                if fenced is not None:
                    self.members.pop(fenced, None)
                    self.joined.discard(fenced)
            elif member_id not in self.members and member_id not in self.pending:
                return pb.JoinGroupResponse(error_code=UNKNOWN_MEMBER_ID)
            self.pending.discard(member_id)
            if instance is not None:
                self.static[instance] = member_id
            self.members[member_id] = Member(member_id, instance, [(p.name, p.metadata) for p in request.protocols])
            if self.phase != PREPARING:
                self.phase, self.joined = PREPARING, set()
            self.joined.add(member_id)
            self.lock.notify_all()
            return self._await_join(member_id)

    def _await_join(self, member_id: str) -> pb.JoinGroupResponse:
        before = self.generation
        deadline = time.monotonic() + self.join_timeout_s
        while self.generation == before:
            remaining = deadline - time.monotonic()
            if self.joined >= set(self.members) or remaining <= 0:
                for missing in set(self.members) - self.joined:
                    del self.members[missing]
                self._complete_join()
                break
            self.lock.wait(remaining)
        if member_id not in self.members:
            return pb.JoinGroupResponse(error_code=UNKNOWN_MEMBER_ID)
        response = pb.JoinGroupResponse(generation_id=self.generation, protocol_type="consumer",
                                        protocol_name=self.protocol, leader=self.leader, member_id=member_id)
        if member_id == self.leader:
            for member in self.members.values():
                metadata = dict(member.protocols)[self.protocol]
                response.members.add(member_id=member.member_id, group_instance_id=member.instance_id,
                                     metadata=metadata)
        return response

    def _complete_join(self) -> None:
        self.generation += 1
        if self.leader not in self.members:
            self.leader = sorted(self.members)[0]
        names = [name for name, _ in self.members[self.leader].protocols]
        self.protocol = next(n for n in names if all(n in dict(m.protocols) for m in self.members.values()))
        self.phase, self.assignments = COMPLETING, {}
        self.events.append(("rebalanced", self.generation))
        self.lock.notify_all()

    def SyncGroup(self, request: pb.SyncGroupRequest) -> pb.SyncGroupResponse:  # noqa: N802
        with self.lock:
            error = self._check_member(request.member_id, request.generation_id)
            if error:
                return pb.SyncGroupResponse(error_code=error)
            if request.member_id == self.leader and self.phase == COMPLETING:
                self.assignments = {a.member_id: a.assignment for a in request.assignments}
                self.phase = STABLE
                self.lock.notify_all()
            generation = self.generation
            self.lock.wait_for(lambda: self.phase != COMPLETING or self.generation != generation, self.join_timeout_s)
            if self.phase != STABLE or self.generation != generation:
                return pb.SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS)
            return pb.SyncGroupResponse(protocol_type="consumer", protocol_name=self.protocol,
                                        assignment=self.assignments.get(request.member_id, b""))

    def _check_member(self, member_id: str, generation_id: int) -> int:
        if member_id not in self.members:
            return UNKNOWN_MEMBER_ID
        if self.phase == PREPARING:
            return REBALANCE_IN_PROGRESS
        if generation_id != self.generation:
            return ILLEGAL_GENERATION
        return 0

    def Heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:  # noqa: N802
        with self.lock:
            if request.HasField("group_instance_id") and self.static.get(request.group_instance_id) != \
                    request.member_id:
                return pb.HeartbeatResponse(error_code=FENCED_INSTANCE_ID)
            return pb.HeartbeatResponse(error_code=self._check_member(request.member_id, request.generation_id))

    def LeaveGroup(self, request: pb.LeaveGroupRequest) -> pb.LeaveGroupResponse:  # noqa: N802
        with self.lock:
            for identity in request.members:
                self.members.pop(identity.member_id, None)
            self.phase, self.joined = (PREPARING if self.members else EMPTY), set()
            self.lock.notify_all()
            return pb.LeaveGroupResponse()

    # ------------------------------------------------------------------ offsets

    def OffsetCommit(self, request: pb.OffsetCommitRequest) -> pb.OffsetCommitResponse:  # noqa: N802
        with self.lock:
            error = 0
            if request.generation_id >= 0 or request.member_id:  # members commit until they rejoin
                if request.member_id not in self.members:
                    error = UNKNOWN_MEMBER_ID
                elif request.generation_id != self.generation:
                    error = ILLEGAL_GENERATION
                elif self.phase == COMPLETING:
                    error = REBALANCE_IN_PROGRESS
            response = pb.OffsetCommitResponse()
            for topic in request.topics:
                out = response.topics.add(name=topic.name)
                for p in topic.partitions:
                    if not error:
                        self.offsets[TopicPartition(topic.name, p.partition_index)] = (
                            p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                    out.partitions.add(partition_index=p.partition_index, error_code=error)
            return response

    def OffsetFetch(self, request: pb.OffsetFetchRequest) -> pb.OffsetFetchResponse:  # noqa: N802
        with self.lock:
            response = pb.OffsetFetchResponse()
            for topic in request.topics:
                out = response.topics.add(name=topic.name)
                for index in topic.partition_indexes:
                    offset, epoch, metadata = self.offsets.get(TopicPartition(topic.name, index), (-1, -1, ""))
                    out.partitions.add(partition_index=index, committed_offset=offset, committed_leader_epoch=epoch,
                                       metadata=metadata)
            return response

    def assigned(self, member_id: str) -> list[TopicPartition]:
        with self.lock:
            return decode_assignment(self.assignments[member_id]).partitions


class _Servicer:
    def __init__(self, fake: FakeGroupCoordinator):
        self._fake = fake

    def __getattr__(self, method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        return lambda request, _context: self._fake.handle(method, request)


class CoordinatorServer:
    """An in-process gRPC server serving a FakeGroupCoordinator's CoordinatorService."""

    def __init__(self, fake: FakeGroupCoordinator, node_id: int = 100):
        self.fake = fake
        self.node_id = node_id
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server(_Servicer(fake), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def node(self) -> common_pb2.Node:
        return common_pb2.Node(node_id=self.node_id, host="127.0.0.1", port=self.port)

    def stop(self) -> None:
        self.server.stop(None)


class FakeLogs:
    """Partitions' records as a fake broker serves them: one batch per append."""

    def __init__(self) -> None:
        self.batches: dict[TopicPartition, list[tuple[int, bytes]]] = defaultdict(list)
        self.ends: dict[TopicPartition, int] = defaultdict(int)

    def append(self, tp: TopicPartition, *values: bytes) -> None:
        self.batches[tp].append((self.ends[tp], build_batch(list(values), base_offset=self.ends[tp])))
        self.ends[tp] += len(values)

    def fetch(self, request: broker_pb2.FetchRequest, _context: Any) -> broker_pb2.FetchResponse:
        response = broker_pb2.FetchResponse()
        for topic in request.topics:
            out = response.responses.add(topic=topic.topic)
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                records = b"".join(batch for base, batch in self.batches[tp] if base >= p.fetch_offset)
                out.partitions.add(partition_index=p.partition, high_watermark=self.ends[tp],
                                   last_stable_offset=self.ends[tp], log_start_offset=0, records=records)
        return response

    def list_offsets(self, request: broker_pb2.ListOffsetsRequest, _context: Any) -> broker_pb2.ListOffsetsResponse:
        response = broker_pb2.ListOffsetsResponse()
        for topic in request.topics:
            out = response.topics.add(name=topic.name)
            for p in topic.partitions:
                end = self.ends[TopicPartition(topic.name, p.partition_index)]
                out.partitions.add(partition_index=p.partition_index, offset=0 if p.timestamp == -2 else end,
                                   timestamp=-1, leader_epoch=0)
        return response


    def offset_for_leader_epoch(self, request: broker_pb2.OffsetForLeaderEpochRequest,
                                _context: Any) -> broker_pb2.OffsetForLeaderEpochResponse:
        response = broker_pb2.OffsetForLeaderEpochResponse()
        for topic in request.topics:
            out = response.topics.add(topic=topic.topic)
            for p in topic.partitions:
                out.partitions.add(partition=p.partition, leader_epoch=p.leader_epoch,
                                   end_offset=self.ends[TopicPartition(topic.topic, p.partition)])
        return response


class GroupCluster:
    """A fake broker and a fake coordinator; `topics` maps topic name to partition count."""

    def __init__(self, broker: FakeNode, topics: dict[str, int], internal: tuple[str, ...] = ()):
        self.broker = broker
        self.fake = FakeGroupCoordinator()
        self.coordinator = CoordinatorServer(self.fake)
        self.logs = FakeLogs()
        self.set_topics(topics, internal)
        broker.on("FindCoordinator", lambda _r, _c: common_pb2.FindCoordinatorResponse(
            coordinator=self.coordinator.node()))
        broker.on("Fetch", self.logs.fetch)
        broker.on("ListOffsets", self.logs.list_offsets)
        broker.on("OffsetForLeaderEpoch", self.logs.offset_for_leader_epoch)

    @property
    def bootstrap(self) -> str:
        return self.broker.address

    def set_topics(self, topics: dict[str, int], internal: tuple[str, ...] = ()) -> None:
        answer = metadata_response([self.broker.node()], internal=internal, topics={
            name: [partition(i, self.broker.node_id) for i in range(count)] for name, count in topics.items()})
        self.broker.on("Metadata", lambda _r, _c: answer)


def group_clusters(fake_nodes) -> Iterator[Callable[..., GroupCluster]]:
    """The body of the test modules' `group_cluster` fixture: `group_cluster({"t": 3})` makes a fake
    broker with these topics and a fake group coordinator, stopped after the test."""
    made: list[GroupCluster] = []

    def make(topics: dict[str, int] | None = None, internal: tuple[str, ...] = ()) -> GroupCluster:
        (broker,) = fake_nodes(1, first_id=len(made) + 1)
        cluster = GroupCluster(broker, {"t": 3} if topics is None else topics, internal)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.coordinator.stop()


FAST = {"retry_backoff_ms": 10, "reconnect_backoff_ms": 10, "request_timeout_ms": 5000, "fetch_max_wait_ms": 10,
        "default_api_timeout_ms": 5000, "session_timeout_ms": 10000, "heartbeat_interval_ms": 3000}


class RecordingListener(ConsumerRebalanceListener):
    """Appends ("revoked" | "assigned" | "lost", partitions) to `events` (shared with a fake)."""

    def __init__(self, events: list | None = None, fail_on: str | None = None):
        self.events = [] if events is None else events
        self.fail_on = fail_on

    def _record(self, what: str, partitions: list[TopicPartition]) -> None:
        self.events.append((what, [str(tp) for tp in partitions]))
        if what == self.fail_on:
            raise RuntimeError(f"{what} failed")

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._record("revoked", partitions)

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self._record("assigned", partitions)

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._record("lost", partitions)


class GroupHarness:
    """A ConsumerCoordinator wired as a Consumer wires it, its heartbeat thread run by hand."""

    def __init__(self, cluster: GroupCluster, clock: Clock = SYSTEM_CLOCK, **config: Any):
        settings = {**FAST, "group_id": "g", **config}
        self.config = ConsumerConfig(bootstrap_servers=cluster.bootstrap, **settings)
        self.clock = clock
        self.pool = ChannelPool.from_config(self.config, clock)
        self.metadata = Metadata.from_config(self.config, clock=clock)
        self.subscriptions = SubscriptionState(OffsetResetStrategy.EARLIEST)
        self.requests = AsyncRequests(GroupRouting(self.pool), clock)
        self.coordinator = ConsumerCoordinator(
            self.config, self.subscriptions, self.metadata, self.pool, self.requests, clock,
            assignors_from_config(self.config.partition_assignment_strategy), start_heartbeat_thread=False)

    @property
    def membership(self):
        return self.coordinator.membership

    def subscribe(self, *topics: str, listener: ConsumerRebalanceListener | None = None) -> None:
        self.coordinator.subscribe(list(topics), None, listener)

    def join(self, timeout_ms: float = 5000) -> None:
        """Polls the coordinator until the member is in a stable group."""
        deadline = Deadline(timeout_ms, self.clock)
        while not self.coordinator.poll(deadline, wait_for_join=True):
            assert not deadline.expired, "the member did not join in time"

    def heartbeat_round(self) -> None:
        """One round of the heartbeat thread, then waits for the heartbeat's answer to be applied."""
        thread = self.coordinator.heartbeat_thread
        assert thread is not None
        thread.run_once()
        wait_until(lambda: not self.membership.heartbeat.in_flight, 5, 0.001,
                   message="the heartbeat answer to be applied")

    def close(self) -> None:
        self.requests.close()
        self.pool.close()
