"""`python -m services.broker --config broker.properties [--override key=value ...]`"""

from __future__ import annotations

import sys

from services.broker.config import BrokerConfig
from services.broker.server import BrokerServer
from services.common.service import run_service


def main(argv: list[str] | None = None) -> int:
    return run_service("broker", "Odradek broker: LogManager and ReplicaManager behind BrokerService.",
                       BrokerConfig, BrokerServer, "broker_id", argv)


if __name__ == "__main__":
    sys.exit(main())
