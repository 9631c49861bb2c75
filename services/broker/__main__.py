"""`python -m services.broker --config broker.properties [--override key=value ...]`

Before anything opens a log, the soft limit on open files is raised to the hard limit, as Kafka's
operations guide tells operators to: a broker holds one descriptor per segment file it reads or
writes, so thousands of partitions need thousands of descriptors.
"""

from __future__ import annotations

import logging
import sys

from services.broker.config import BrokerConfig
from services.broker.server import BrokerServer
from services.common.heap import keep_freed_heap
from services.common.service import run_service

logger = logging.getLogger(__name__)


def raise_open_files_limit() -> tuple[int, int] | None:
    """Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the (soft, hard) limits now in
    force, or None where there are none to change (no `resource` module)."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            logger.warning("cannot raise the open files limit from %d to %d: %s", soft, hard, exc)
    return soft, hard


def main(argv: list[str] | None = None) -> int:
    raise_open_files_limit()
    keep_freed_heap()
    return run_service("broker", "Odradek broker: LogManager and ReplicaManager behind BrokerService.",
                       BrokerConfig, BrokerServer, "broker_id", argv)


if __name__ == "__main__":
    sys.exit(main())
