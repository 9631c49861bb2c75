"""`python -m services.controller --config controller.properties [--override key=value ...]`"""

from __future__ import annotations

import sys

from services.common.config import ConfigError
from services.common.logging_setup import configure_logging
from services.common.service import service_arguments
from services.controller.config import ControllerServiceConfig
from services.controller.server import ControllerServer


def main(argv: list[str] | None = None) -> int:
    args = service_arguments("Odradek controller: elections, topics and partition leadership.", argv)
    sources = [args.config] if args.config else []
    try:
        config = ControllerServiceConfig.load(*sources, args.overrides)
    except ConfigError as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"controller-{config.controller_id}")
    ControllerServer(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
