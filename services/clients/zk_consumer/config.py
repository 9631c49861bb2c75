"""`ZkConsumerConfig`: the 0.8 high-level consumer's keys, with Kafka 0.8's names and defaults.

The connector finds the cluster through ZooKeeper (`zookeeper.connect`, with an optional chroot
suffix `host:port/chroot`): brokers come from `/brokers/ids`, so there is no bootstrap list.
Given as a mapping of dotted keys or as snake_case keywords, as every Odradek client:

    ZkConsumerConfig.load({"zookeeper.connect": "127.0.0.1:2181", "group.id": "g"}, env={})
"""

from __future__ import annotations

from services.clients.zk_consumer.assignment import RANGE, STRATEGIES
from services.clients.zk_consumer.offset_storage import STORAGES, ZOOKEEPER
from services.common.config import REQUIRED, ConfigType, at_least, non_empty, one_of, setting
from services.common.zk.connect import ZkTlsConfig

SMALLEST = "smallest"
LARGEST = "largest"


class ZkConsumerConfig(ZkTlsConfig):
    zookeeper_connect: str = setting(ConfigType.STRING, REQUIRED, non_empty,
                                     doc="ZooKeeper connect string, optionally with a chroot suffix.")
    group_id: str = setting(ConfigType.STRING, REQUIRED, non_empty, doc="The consumer group.")
    consumer_id: str | None = setting(ConfigType.STRING, None,
                                      doc="Fixed member id; generated from host, time and a UUID if unset.")
    client_id: str = setting(ConfigType.STRING, "", doc="Name sent to brokers; the group id if empty.")
    auto_commit_enable: bool = setting(ConfigType.BOOLEAN, True,
                                       doc="Commit consumed offsets periodically, in rebalances and on shutdown.")
    auto_commit_interval_ms: int = setting(ConfigType.INT, 60000, at_least(1))
    auto_offset_reset: str = setting(ConfigType.STRING, LARGEST, one_of(SMALLEST, LARGEST),
                                     doc="Where to start without a valid committed offset.")
    consumer_timeout_ms: int = setting(ConfigType.INT, -1,
                                       doc="A stream raises ConsumerTimeoutError after this long "
                                           "without a message; -1 blocks forever.")
    partition_assignment_strategy: str = setting(ConfigType.STRING, RANGE, one_of(*STRATEGIES),
                                                 doc="How partitions are spread over the group's threads: "
                                                     "per topic in ranges, or all topics dealt round-robin.")
    rebalance_max_retries: int = setting(ConfigType.INT, 4, at_least(1))
    rebalance_backoff_ms: int = setting(ConfigType.INT, 2000, at_least(0))
    fetch_message_max_bytes: int = setting(ConfigType.INT, 1024 * 1024, at_least(1),
                                           doc="Bytes fetched per partition per request.")
    queued_max_message_chunks: int = setting(ConfigType.INT, 2, at_least(1),
                                             doc="Fetched chunks buffered per stream.")
    num_consumer_fetchers: int = setting(ConfigType.INT, 1, at_least(1),
                                         doc="Fetcher threads per broker.")
    refresh_leader_backoff_ms: int = setting(ConfigType.INT, 200, at_least(0))
    fetch_wait_max_ms: int = setting(ConfigType.INT, 100, at_least(0))
    fetch_min_bytes: int = setting(ConfigType.INT, 1, at_least(0))
    socket_timeout_ms: int = setting(ConfigType.INT, 30000, at_least(1),
                                     doc="Deadline of one request to a broker.")
    exclude_internal_topics: bool = setting(ConfigType.BOOLEAN, True)
    zookeeper_session_timeout_ms: int = setting(ConfigType.INT, 6000, at_least(1))
    zookeeper_connection_timeout_ms: int = setting(ConfigType.INT, 6000, at_least(1))
    offsets_storage: str = setting(ConfigType.STRING, ZOOKEEPER, one_of(*STORAGES),
                                   doc="Where offsets are committed and read: ZooKeeper, or the group coordinator.")
    dual_commit_enabled: bool = setting(ConfigType.BOOLEAN, True,
                                        doc="With kafka storage, also commit to ZooKeeper, and resume from the "
                                            "larger of the two offsets (for migrating a group).")
    offsets_channel_backoff_ms: int = setting(ConfigType.INT, 1000, at_least(0),
                                              doc="Wait before asking the coordinator again.")
    offsets_channel_socket_timeout_ms: int = setting(ConfigType.INT, 10000, at_least(1),
                                                     doc="Deadline of one offset request to the coordinator.")
    offsets_commit_max_retries: int = setting(ConfigType.INT, 5, at_least(0),
                                              doc="Retries of a failed commit to Kafka; auto-commit ticks never retry.")
