"""The group APIs over Kafka's protocol (`kafka_api.groups`) at the versions whose answers differ,
against a group coordinator on a manual clock: JoinGroup before v4 joins a new member at once while
v4 asks it for its member id first (KIP-394); LeaveGroup before v3 answers a member's error at the
top, from v3 per member, and DescribeGroups shows the group and its members as Kafka does; offsets
committed at OffsetCommit v2 are fetched at OffsetFetch v1 and in a batch of groups at v8."""

from __future__ import annotations

import asyncio
import importlib
from datetime import timedelta
from typing import Any

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, KafkaWireServer, fields_of, kafka_error
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.kafka_api.groups import GroupKafkaApis
from services.coordinator.servicer import CoordinatorServicer
from tests.kafka_wire_support import request_frame
from tests.unit.coordinator.group.support import Harness
from tests.unit.kafka_wire.test_kafka_wire import read_response

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 8, 9, 11, 13, 14, 15
SCHEMA_PACKAGES = {OFFSET_COMMIT: "offset_commit", OFFSET_FETCH: "offset_fetch", JOIN_GROUP: "join_group",
                   LEAVE_GROUP: "leave_group", SYNC_GROUP: "sync_group"}
TOPIC = "events"


def nested(api_key: int, version: int, entity: str, **values: Any) -> Any:
    """An entity nested in a request of that API version, from the fields its version has."""
    module = importlib.import_module(f"kio.schema.{SCHEMA_PACKAGES[api_key]}.v{version}.request")
    return fields_of(getattr(module, entity), **values)


class Client:
    """One connection to a coordinator's Kafka listener serving the group APIs of `harness`."""

    def __init__(self, harness: Harness, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.harness = harness
        self.reader, self.writer = reader, writer
        self.correlation_id = 0

    async def call(self, api_key: int, version: int, **body: Any) -> Any:
        """The response, firing the coordinator's due timers while it is awaited."""
        self.correlation_id += 1
        self.writer.write(request_frame(api_key, version, self.correlation_id, **body))
        answer = asyncio.ensure_future(read_response(self.reader, api_key, version))
        while not answer.done():
            self.harness.tick(0)
            await asyncio.sleep(0.01)
        correlation_id, response = answer.result()
        assert correlation_id == self.correlation_id
        return response

    async def join(self, version: int, group: str, member_id: str = "") -> Any:
        return await self.call(JOIN_GROUP, version, group_id=group, session_timeout=timedelta(seconds=10),
                               rebalance_timeout=timedelta(seconds=30), member_id=member_id, group_instance_id=None,
                               protocol_type="consumer", reason=None, protocols=(
                                   nested(JOIN_GROUP, version, "JoinGroupRequestProtocol", name="range",
                                          metadata=b"subscription"),))


def run(test) -> None:
    async def main() -> None:
        harness = Harness()
        registry = ApiRegistry()
        GroupKafkaApis(CoordinatorServicer(harness.coordinator, DirectorySnapshot)).register(registry)
        server = KafkaWireServer(registry, "127.0.0.1", 0)
        port = await server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await asyncio.wait_for(test(Client(harness, reader, writer)), 20)
        finally:
            writer.close()
            await server.stop()
    asyncio.run(main())


def test_join_group_before_v4_joins_a_new_member_at_once_and_v4_asks_for_its_member_id_first():
    async def test(client: Client) -> None:
        old = await client.join(0, "old-clients")
        assert old.error_code == kafka_error(Errors.NONE) and old.member_id.startswith("odradek-tests-")
        assert (old.generation_id, old.leader) == (1, old.member_id)
        assert [(m.member_id, m.metadata) for m in old.members] == [(old.member_id, b"subscription")]

        asked = await client.join(4, "new-clients")
        assert asked.error_code == kafka_error(Errors.MEMBER_ID_REQUIRED) and asked.member_id
        joined = await client.join(4, "new-clients", asked.member_id)
        assert joined.error_code == kafka_error(Errors.NONE)
        assert (joined.member_id, joined.generation_id, joined.leader) == (asked.member_id, 1, asked.member_id)
    run(test)


def test_leave_group_before_v3_answers_the_members_error_at_the_top_and_from_v3_per_member():
    async def test(client: Client) -> None:
        member_id = (await client.join(1, "leaving")).member_id
        synced = await client.call(SYNC_GROUP, 0, group_id="leaving", generation_id=1, member_id=member_id,
                                   assignments=(nested(SYNC_GROUP, 0, "SyncGroupRequestAssignment",
                                                       member_id=member_id, assignment=b"partitions"),))
        assert (synced.error_code, synced.assignment) == (kafka_error(Errors.NONE), b"partitions")
        unknown = await client.call(LEAVE_GROUP, 0, group_id="leaving", member_id="nobody")
        assert unknown.error_code == kafka_error(Errors.UNKNOWN_MEMBER_ID)
        batch = await client.call(LEAVE_GROUP, 3, group_id="leaving", members=(
            nested(LEAVE_GROUP, 3, "MemberIdentity", member_id="nobody", group_instance_id=None),))
        assert batch.error_code == kafka_error(Errors.NONE)
        assert [(m.member_id, m.error_code) for m in batch.members] == [
            ("nobody", kafka_error(Errors.UNKNOWN_MEMBER_ID))]

        described = await client.call(DESCRIBE_GROUPS, 5, groups=("leaving",), include_authorized_operations=False)
        group = described.groups[0]
        assert (group.group_state, group.protocol_type, group.protocol_data) == ("Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
                for m in group.members] == [(member_id, "odradek-tests", "/127.0.0.1", b"subscription", b"partitions")]

        left = await client.call(LEAVE_GROUP, 1, group_id="leaving", member_id=member_id)
        assert left.error_code == kafka_error(Errors.NONE)
        described = await client.call(DESCRIBE_GROUPS, 5, groups=("leaving",), include_authorized_operations=False)
        assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", ())
    run(test)


def test_offsets_committed_at_v2_are_fetched_at_v1_and_in_a_batch_of_groups_at_v8():
    async def test(client: Client) -> None:
        committed = await client.call(
            OFFSET_COMMIT, 2, group_id="simple", generation_id_or_member_epoch=-1, member_id="",
            retention_time=timedelta(milliseconds=-1), topics=(nested(
                OFFSET_COMMIT, 2, "OffsetCommitRequestTopic", name=TOPIC, partitions=(
                    nested(OFFSET_COMMIT, 2, "OffsetCommitRequestPartition", partition_index=0, committed_offset=42,
                           committed_metadata="checkpoint"),)),))
        assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [
            (0, kafka_error(Errors.NONE))]

        fetched = await client.call(OFFSET_FETCH, 1, group_id="simple", topics=(
            nested(OFFSET_FETCH, 1, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0, 1)),))
        assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
            (0, 42, "checkpoint"), (1, -1, "")]

        batch = await client.call(OFFSET_FETCH, 8, require_stable=True, groups=(
            nested(OFFSET_FETCH, 8, "OffsetFetchRequestGroup", group_id="simple", topics=None),
            nested(OFFSET_FETCH, 8, "OffsetFetchRequestGroup", group_id="absent", topics=None)))
        simple, absent = batch.groups
        assert simple.error_code == absent.error_code == kafka_error(Errors.NONE)
        assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in simple.topics] == [
            (TOPIC, [(0, 42)])]
        assert absent.topics == ()
    run(test)
