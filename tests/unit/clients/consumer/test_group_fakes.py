"""The consumer group tests' harness (the test_group_* modules; no tests here).

`GroupCoordinatorServer` is the real group coordinator (its pure core run by `GroupCoordinator`)
behind the real CoordinatorServicer, on an in-process gRPC runtime on 127.0.0.1, so the client is
tested against the coordinator's own rules. `fail(method, code, ...)` queues error answers and
`script(method, handler)` replaces a method, for what the coordinator would not do by itself; a
few helpers act on the coordinator's side (a rebalance, a session expiry, a member without a
client, a committed offset). A fake broker (tests.unit.clients.support.FakeNode) answers Metadata
and FindCoordinator and serves `FakeLogs`.

`GroupHarness` drives a ConsumerCoordinator directly (heartbeat thread not started, so tests run
its rounds by hand with `heartbeat_round()`), with the same plumbing a Consumer builds.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from typing import Any

from services.clients.consumer.assignors import assignors_from_config
from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.coordinator import ConsumerCoordinator
from services.clients.consumer.listener import ConsumerRebalanceListener
from services.clients.consumer.protocol import Subscription, encode_subscription
from services.clients.consumer.subscription import OffsetResetStrategy, SubscriptionState
from services.clients.metadata import Metadata
from services.clients.transport import AsyncRequests, ChannelPool, Deadline
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2 as pb
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.records import build_batch
from services.common.scheduler import Scheduler
from services.common.service import ServiceRuntime
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.group import CommittedOffset as OM
from services.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    GroupCoordinatorCore,
    Outcome,
)
from services.coordinator.servicer import CoordinatorServicer
from services.devcluster.proc import wait_until
from tests.unit.clients.support import FakeNode, metadata_response, partition

GROUP_CONFIG = {"group_initial_rebalance_delay_ms": 0}
WAIT_S = 10


class MemoryStore:
    """`__consumer_offsets` in memory: every append is written at once."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        self._lock = threading.Lock()

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], callback: Callable[[int], None]):
        with self._lock:
            self.records.extend((partition, key, value) for key, value in records)
        callback(0)


class GroupCoordinatorServer:
    """The real group coordinator (`GroupCoordinator` over its pure core, on a Scheduler and a
    MemoryStore, owning every partition of `__consumer_offsets`) served by the real
    `CoordinatorServicer` on an in-process runtime. `events` records (method, member id) per
    call, in order (listeners may append theirs); `fail(method, *codes)` answers the next calls
    with these codes instead, `script(method, handler)` answers them with `handler(request)`."""

    def __init__(self, node_id: int = 100, group_id: str = "g") -> None:
        self.node_id = node_id
        self.group_id = group_id
        self.scheduler = Scheduler(SYSTEM_CLOCK, name="test-group-coordinator")
        self.scheduler.startup()
        self.store = MemoryStore()
        self.coordinator = GroupCoordinator(GroupConfig(**GROUP_CONFIG), SYSTEM_CLOCK, self.scheduler, self.store)
        self.coordinator.start()
        for owned in range(GroupConfig(**GROUP_CONFIG).offsets_topic_num_partitions):
            self.coordinator.begin_loading(owned)
            self.coordinator.complete_loading(owned)
        self.lock = threading.Lock()
        self.errors: dict[str, deque[int]] = defaultdict(deque)
        self.scripted: dict[str, Callable[[Any], Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.events: list[tuple[str, Any]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.servicer = CoordinatorServicer(self.coordinator, DirectorySnapshot)
        self.runtime = ServiceRuntime("group-coordinator-test", "127.0.0.1:0", max_workers=4)
        self.runtime.add_servicer(coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server, _Injecting(self))
        self.port = self.runtime.start()

    def node(self) -> common_pb2.Node:
        return common_pb2.Node(node_id=self.node_id, host="127.0.0.1", port=self.port)

    def stop(self) -> None:
        self.runtime.shutdown(grace_s=0.1)
        self.coordinator.shutdown()
        self.scheduler.shutdown(timeout_s=5.0)

    # ------------------------------------------------------------------ scripting and inspection

    def fail(self, method: str, *codes: int) -> None:
        with self.lock:
            self.errors[method].extend(codes)

    def script(self, method: str, handler: Callable[[Any], Any]) -> None:
        self.scripted[method] = handler

    def requests(self, method: str) -> list[Any]:
        with self.lock:
            return [request for name, request in self.calls if name == method]

    def answer(self, method: str, request: Any) -> Any:
        """The coordinator's own answer to `request` (for a scripted handler, on a worker thread)."""
        real = getattr(self.servicer, method)
        if inspect.iscoroutinefunction(real):
            return asyncio.run_coroutine_threadsafe(real(request, None), self.loop).result(WAIT_S)
        return real(request, None)

    def intercept(self, method: str, request: Any) -> tuple[Callable[[Any], Any] | None, int]:
        """Records the call; the handler or error code that answers it instead of the coordinator."""
        with self.lock:
            self.calls.append((method, request))
            self.events.append((method, getattr(request, "member_id", None)))
            queued = self.errors.get(method)
            code = queued.popleft() if queued else 0
        return self.scripted.get(method), code

    # ------------------------------------------------------------------ the coordinator's side

    def state(self) -> str:
        return self.coordinator.handle_describe_group(self.group_id).state

    def committed(self, tp: TopicPartition) -> int:
        _error, fetched = self.coordinator.handle_fetch_offsets(self.group_id, [tp])
        return fetched[tp].offset

    def seed_offset(self, tp: TopicPartition, offset: int) -> None:
        """Commits `offset` as a client outside the membership would (generation -1)."""
        answers: list = []
        self.coordinator.handle_commit_offsets(self.group_id, "", None, -1, {tp: OM(offset)}, answers.append)
        assert answers == [{tp: 0}]

    def start_rebalance(self) -> None:
        """As when a member's metadata changes: every member must rejoin."""

        def command(core: GroupCoordinatorCore) -> Outcome:
            fx = Outcome()
            _error, group = core.manager.get_group(self.group_id)
            core._rebalancer.maybe_prepare_rebalance(group, fx)
            return fx

        self.coordinator.run(command)

    def expire_session(self, member_id: str) -> None:
        """The member's session timeout passes (its heartbeat timer fires now)."""

        def command(core: GroupCoordinatorCore) -> Outcome:
            _error, group = core.manager.get_group(self.group_id)
            return core.on_timer(group.get(member_id).heartbeat_timer)

        self.coordinator.run(command)

    def add_member(self, client_id: str = "ghost", rebalance_timeout_ms: int = 60000) -> str:
        """A member that joins and syncs without a client (it then never heartbeats or rejoins)."""
        answers: list = []
        join = (self.group_id, "", None, client_id, "/127.0.0.1", rebalance_timeout_ms, 30000, "consumer",
                [("range", encode_subscription(Subscription(["t"])))])
        self.coordinator.handle_join_group(*join, answers.append)
        member_id = answers[0].member_id
        self.coordinator.handle_join_group(join[0], member_id, *join[2:], answers.append)
        wait_until(lambda: len(answers) == 2, WAIT_S, 0.001, message="the member's JoinGroup answer")
        generation = answers[1].generation_id
        self.coordinator.handle_sync_group(self.group_id, generation, member_id, None, None, None, {}, answers.append)
        wait_until(lambda: len(answers) == 3, WAIT_S, 0.001, message="the member's SyncGroup answer")
        return member_id

    def leave(self, member_id: str) -> None:
        self.coordinator.handle_leave_group(self.group_id, [(member_id, None)])


class _Injecting:
    """The servicer registered with gRPC: each call goes to the coordinator's real servicer unless
    `fail` or `script` says otherwise."""

    def __init__(self, server: GroupCoordinatorServer) -> None:
        self._server = server

    def __getattr__(self, method: str) -> Callable[[Any, Any], Any]:
        real = getattr(self._server.servicer, method)

        async def handle(request: Any, context: Any) -> Any:
            handler, code = self._server.intercept(method, request)
            loop = self._server.loop = asyncio.get_running_loop()
            if handler is not None:
                return await loop.run_in_executor(None, handler, request)
            if code:
                return getattr(pb, f"{method}Response")(error_code=code)
            if inspect.iscoroutinefunction(real):
                return await real(request, context)
            return await loop.run_in_executor(None, real, request, context)

        return handle


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
    """A fake broker and the real group coordinator; `topics` maps topic name to partition count."""

    def __init__(self, broker: FakeNode, topics: dict[str, int], internal: tuple[str, ...] = ()):
        self.broker = broker
        self.groups = GroupCoordinatorServer()
        self.logs = FakeLogs()
        self.set_topics(topics, internal)
        broker.on("FindCoordinator", lambda _r, _c: common_pb2.FindCoordinatorResponse(
            coordinator=self.groups.node()))
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
    broker with these topics and a group coordinator, stopped after the test."""
    made: list[GroupCluster] = []

    def make(topics: dict[str, int] | None = None, internal: tuple[str, ...] = ()) -> GroupCluster:
        (broker,) = fake_nodes(1, first_id=len(made) + 1)
        cluster = GroupCluster(broker, {"t": 3} if topics is None else topics, internal)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.groups.stop()


FAST = {"retry_backoff_ms": 10, "reconnect_backoff_ms": 10, "request_timeout_ms": 5000, "fetch_max_wait_ms": 10,
        "default_api_timeout_ms": 5000, "session_timeout_ms": 10000, "heartbeat_interval_ms": 3000}


class RecordingListener(ConsumerRebalanceListener):
    """Appends ("revoked" | "assigned" | "lost", partitions) to `events` (shared with the coordinator's)."""

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
        self.requests = AsyncRequests(self.pool, clock)
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
