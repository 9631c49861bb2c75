"""Kafka's error codes: name, numeric code, whether retriable, whether metadata must be refreshed.

Per-partition results carry these codes in an `error_code` field; Python callers see them as
`KafkaError` exceptions. Codes and names are Apache Kafka's (as of 3.x, a superset of 2.8's).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


@dataclass(frozen=True, slots=True)
class ErrorCode:
    code: int
    name: str
    retriable: bool
    invalid_metadata: bool
    description: str


# code, name, retriable, invalid_metadata (refresh metadata before retrying), description
_TABLE = [
    (-1, "UNKNOWN_SERVER_ERROR", False, False, "The server experienced an unexpected error."),
    (0, "NONE", False, False, ""),
    (1, "OFFSET_OUT_OF_RANGE", False, False, "The requested offset is not within the range of offsets."),
    (2, "CORRUPT_MESSAGE", True, False, "The message failed its CRC check, or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True, "This server does not host this topic-partition."),
    (4, "INVALID_FETCH_SIZE", False, False, "The requested fetch size is invalid."),
    (5, "LEADER_NOT_AVAILABLE", True, True, "There is no leader for this topic-partition."),
    (6, "NOT_LEADER_OR_FOLLOWER", True, True, "This server is not the leader or follower for the partition."),
    (7, "REQUEST_TIMED_OUT", True, False, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True, True, "The replica is not available for the requested partition."),
    (10, "MESSAGE_TOO_LARGE", False, False, "The request included a message larger than the server accepts."),
    (11, "STALE_CONTROLLER_EPOCH", False, False, "The controller moved to another broker."),
    (12, "OFFSET_METADATA_TOO_LARGE", False, False, "The metadata field of the offset request was too large."),
    (13, "NETWORK_EXCEPTION", True, True, "The server disconnected before a response was received."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, False, "The coordinator is loading and cannot process requests."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, False, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, False, "This is not the correct coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", False, False, "The request attempted to perform an operation on an invalid topic."),
    (18, "RECORD_LIST_TOO_LARGE", False, False, "The request included a batch larger than the segment size."),
    (19, "NOT_ENOUGH_REPLICAS", True, False, "Messages are rejected since there are fewer in-sync replicas than required."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, False, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (21, "INVALID_REQUIRED_ACKS", False, False, "Produce request specified an invalid value for required acks."),
    (22, "ILLEGAL_GENERATION", False, False, "Specified group generation id is not valid."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, False, "The group member's supported protocols are incompatible with those of existing members."),
    (24, "INVALID_GROUP_ID", False, False, "The configured groupId is invalid."),
    (25, "UNKNOWN_MEMBER_ID", False, False, "The coordinator is not aware of this member."),
    (26, "INVALID_SESSION_TIMEOUT", False, False, "The session timeout is not within the range allowed by the broker."),
    (27, "REBALANCE_IN_PROGRESS", False, False, "The group is rebalancing, so a rejoin is needed."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, False, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, False, "Topic authorization failed."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, False, "Group authorization failed."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, False, "Cluster authorization failed."),
    (32, "INVALID_TIMESTAMP", False, False, "The timestamp of the message is out of acceptable range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, False, "The broker does not support the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", False, False, "Request is not valid given the current SASL state."),
    (35, "UNSUPPORTED_VERSION", False, False, "The version of API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", False, False, "Topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, False, "Number of partitions is below 1."),
    (38, "INVALID_REPLICATION_FACTOR", False, False, "Replication factor is below 1 or larger than the number of available brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, False, "Replica assignment is invalid."),
    (40, "INVALID_CONFIG", False, False, "Configuration is invalid."),
    (41, "NOT_CONTROLLER", True, False, "This is not the correct controller for this cluster."),
    (42, "INVALID_REQUEST", False, False, "This most likely occurs because of a request being malformed."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, False, "The message format version on the broker does not support the request."),
    (44, "POLICY_VIOLATION", False, False, "Request parameters do not satisfy the configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False, "The broker received an out of order sequence number."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, False, "The broker received a duplicate sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", False, False, "Producer attempted to produce with an old epoch."),
    (48, "INVALID_TXN_STATE", False, False, "The producer attempted a transactional operation in an invalid state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, False, "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, False, "The transaction timeout is larger than the maximum value allowed by the broker."),
    (51, "CONCURRENT_TRANSACTIONS", True, False, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, False, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, False, "Transactional Id authorization failed."),
    (54, "SECURITY_DISABLED", False, False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False, False, "The broker did not attempt to execute this operation."),
    (56, "KAFKA_STORAGE_ERROR", True, True, "Disk error when trying to access log file on the disk."),
    (57, "LOG_DIR_NOT_FOUND", False, False, "The user-specified log directory is not found in the broker config."),
    (58, "SASL_AUTHENTICATION_FAILED", False, False, "SASL Authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", False, False, "The broker could not locate the producer metadata associated with the producer id."),
    (60, "REASSIGNMENT_IN_PROGRESS", False, False, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, False, "Delegation Token feature is not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, False, "Delegation Token is not found on server."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, False, "Specified Principal is not valid Owner/Renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, False, "Delegation Token requests are not allowed on this connection."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, False, "Delegation Token authorization failed."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, False, "Delegation Token is expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, False, "Supplied principalType is not supported."),
    (68, "NON_EMPTY_GROUP", False, False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", False, False, "The group id does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, False, "The fetch session ID was not found."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, False, "The fetch session epoch is invalid."),
    (72, "LISTENER_NOT_FOUND", True, True, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (73, "TOPIC_DELETION_DISABLED", False, False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True, True, "The leader epoch in the request is older than the epoch on the broker."),
    (75, "UNKNOWN_LEADER_EPOCH", True, False, "The leader epoch in the request is newer than the epoch on the broker."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, False, "The requesting client does not support the compression type of given partition."),
    (77, "STALE_BROKER_EPOCH", False, False, "Broker epoch has changed."),
    (78, "OFFSET_NOT_AVAILABLE", True, False, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (79, "MEMBER_ID_REQUIRED", False, False, "The group member needs to have a valid member id before actually entering a consumer group."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, False, "The preferred leader was not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, False, "The consumer group has reached its max size."),
    (82, "FENCED_INSTANCE_ID", False, False, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, False, "Eligible topic partition leaders are not available."),
    (84, "ELECTION_NOT_NEEDED", True, False, "Leader election not needed for topic partition."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, False, "No partition reassignment is in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, False, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    (87, "INVALID_RECORD", False, False, "This record has failed the validation on broker and hence will be rejected."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, False, "There are unstable offsets that need to be cleared."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, False, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", False, False, "There is a newer producer with the same transactionalId which fences the current one."),
    (91, "RESOURCE_NOT_FOUND", False, False, "A request illegally referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", False, False, "A request illegally referred to the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", False, False, "Requested credential would not meet criteria for acceptability."),
    (94, "INCONSISTENT_VOTER_SET", False, False, "Indicates that either the sender or recipient of a voter-only request is not one of the expected voters."),
    (95, "INVALID_UPDATE_VERSION", False, False, "The given update version was invalid."),
    (96, "FEATURE_UPDATE_FAILED", False, False, "Unable to update finalized features due to an unexpected server error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, False, "Request principal deserialization failed during forwarding."),
    (98, "SNAPSHOT_NOT_FOUND", False, False, "Requested snapshot was not found."),
    (99, "POSITION_OUT_OF_RANGE", False, False, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (100, "UNKNOWN_TOPIC_ID", True, True, "This server does not host this topic ID."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, False, "This broker ID is already in use."),
    (102, "BROKER_ID_NOT_REGISTERED", False, False, "The given broker ID was not registered."),
    (103, "INCONSISTENT_TOPIC_ID", True, True, "The log's topic ID did not match the topic ID in the request."),
    (104, "INCONSISTENT_CLUSTER_ID", False, False, "The clusterId in the request does not match that found on the server."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, False, "The transactionalId could not be found."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, False, "The fetch session encountered inconsistent topic ID usage."),
    (107, "INELIGIBLE_REPLICA", False, False, "The new ISR contains at least one ineligible replica."),
    (108, "NEW_LEADER_ELECTED", False, False, "The AlterPartition request successfully updated the partition state but the leader has changed."),
]

ERRORS_BY_CODE: dict[int, ErrorCode] = {row[0]: ErrorCode(*row) for row in _TABLE}
ERRORS_BY_NAME: dict[str, ErrorCode] = {e.name: e for e in ERRORS_BY_CODE.values()}

Errors = IntEnum("Errors", {row[1]: row[0] for row in _TABLE}, module=__name__)
"""Every error code by name, the one way code names a code: `Errors.NOT_COORDINATOR` is an `int`
(16), so it goes straight into a protobuf `error_code` field and compares equal to one read back;
`Errors(16).name` is "NOT_COORDINATOR"."""



# Kafka's AuthenticationException family: the client's credentials were refused. Fatal to a
# client, which raises them to the application instead of retrying.
AUTHENTICATION_ERRORS = frozenset({Errors.SASL_AUTHENTICATION_FAILED, Errors.ILLEGAL_SASL_STATE,
                                   Errors.UNSUPPORTED_SASL_MECHANISM})


def error_for_code(code: int) -> ErrorCode:
    """The ErrorCode for a numeric code; unknown codes map to UNKNOWN_SERVER_ERROR's flags."""
    found = ERRORS_BY_CODE.get(code)
    if found is None:
        return ErrorCode(code, f"UNKNOWN_ERROR_CODE_{code}", False, False, "An error code unknown to this client.")
    return found


class KafkaError(Exception):
    """An error carrying one of Kafka's codes.

    Subclasses pin `error`; the base class takes it as a keyword:
    `KafkaError("no such topic", error=Errors.UNKNOWN_TOPIC_OR_PARTITION)`. `error_name` is its name.
    """

    error: Errors = Errors.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", *, error: Errors | None = None):
        if error is not None:
            self.error = Errors(error)
        self.spec = ERRORS_BY_CODE[self.error]
        super().__init__(message or self.spec.description)

    @property
    def error_name(self) -> str:
        return self.error.name

    @property
    def code(self) -> int:
        return self.spec.code

    @property
    def retriable(self) -> bool:
        return self.spec.retriable

    @property
    def invalid_metadata(self) -> bool:
        return self.spec.invalid_metadata

    def __str__(self) -> str:
        return f"{self.error_name} ({self.spec.code}): {self.args[0]}"

    @classmethod
    def from_code(cls, code: int, message: str = "") -> KafkaError:
        if code not in ERRORS_BY_CODE:
            return KafkaError(message or error_for_code(code).description)
        return KafkaError(message, error=Errors(code))


class StartupRefusedError(KafkaError):
    """A process that must not start: what it found (a registration in ZooKeeper, its log dirs)
    belongs to another process or another cluster. Its service exits 1 with the message."""


def raise_for_code(code: int, message: str = "") -> None:
    """Raises a KafkaError for any code but NONE."""
    if code != Errors.NONE:
        raise KafkaError.from_code(code, message)
