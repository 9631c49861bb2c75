"""`python -m services.coordinator --config coordinator.properties [--override key=value ...]`"""

from __future__ import annotations

import sys

from services.common.config import ConfigError
from services.common.logging_setup import configure_logging
from services.common.service import service_arguments
from services.coordinator.config import CoordinatorServiceConfig
from services.coordinator.server import CoordinatorServer


def main(argv: list[str] | None = None) -> int:
    args = service_arguments("Odradek coordinator: consumer groups and committed offsets.", argv)
    sources = [args.config] if args.config else []
    try:
        config = CoordinatorServiceConfig.load(*sources, args.overrides)
    except ConfigError as exc:
        print(f"coordinator: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"coordinator-{config.coordinator_id}")
    CoordinatorServer(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
