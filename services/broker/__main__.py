"""`python -m services.broker --config broker.properties [--override key=value ...]`"""

from __future__ import annotations

import sys

from services.broker.config import BrokerConfig
from services.broker.server import BrokerServer
from services.common.config import ConfigError
from services.common.logging_setup import configure_logging
from services.common.service import service_arguments


def main(argv: list[str] | None = None) -> int:
    args = service_arguments("Odradek broker: LogManager and ReplicaManager behind BrokerService.", argv)
    sources = [args.config] if args.config else []
    try:
        config = BrokerConfig.load(*sources, args.overrides)
    except ConfigError as exc:
        print(f"broker: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"broker-{config.broker_id}")
    BrokerServer(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
