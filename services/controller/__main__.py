"""`python -m services.controller --config controller.properties [--override key=value ...]`"""

from __future__ import annotations

import sys

from services.common.service import run_service
from services.controller.config import ControllerServiceConfig
from services.controller.server import ControllerServer


def main(argv: list[str] | None = None) -> int:
    return run_service("controller", "Odradek controller: elections, topics and partition leadership.",
                       ControllerServiceConfig, ControllerServer, "controller_id", argv)


if __name__ == "__main__":
    sys.exit(main())
