"""A broker's log directories at start: each checked (created when missing, readable and writable, not
the same directory twice) and locked with an exclusive flock on its `.lock` file, so that no second
broker process uses it."""

from __future__ import annotations

import fcntl
import os

from services.broker.log.errors import KafkaStorageError
from services.broker.log.files import LOCK_FILE


def create_and_validate_log_dirs(dirs) -> list[str]:
    """The absolute paths of `dirs`, created when missing; KafkaStorageError for a directory given twice
    (also through a link), one that cannot be read and written, or none at all."""
    result: list[str] = []
    seen = set()
    for log_dir in dirs:
        path = os.path.abspath(log_dir)
        os.makedirs(path, exist_ok=True)
        canonical = os.path.realpath(path)
        if canonical in seen:
            raise KafkaStorageError(f"duplicate log directory found: {', '.join(dirs)}")
        seen.add(canonical)
        if not os.access(path, os.R_OK | os.W_OK):
            raise KafkaStorageError(f"{path} is not a readable and writable log directory")
        result.append(path)
    if not result:
        raise KafkaStorageError("no log directories configured")
    return result


def lock_log_dir(log_dir: str) -> int:
    """Holds an exclusive flock on `<log_dir>/.lock` (the fd, kept open while the broker runs)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(os.path.join(log_dir, LOCK_FILE), flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise KafkaStorageError(
            f"failed to acquire the lock on {LOCK_FILE} in {log_dir}: another process or thread is using "
            "this directory") from None
    return fd
