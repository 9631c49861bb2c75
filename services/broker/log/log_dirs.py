"""A broker's log directories at start: each checked (created when missing, readable and writable, not
the same directory twice; one that fails starts offline, and the broker refuses to start when all
do) and locked with an exclusive flock on its `.lock` file, so that no second
broker process uses it."""

from __future__ import annotations

import fcntl
import os

from services.broker.log.errors import KafkaStorageError
from services.broker.log.files import LOCK_FILE


def create_and_validate_log_dirs(dirs) -> tuple[list[str], dict[str, str]]:
    """The absolute paths of `dirs` that can be used (created when missing), and each that cannot
    (it cannot be created, is not a directory, or cannot be read and written) with the reason; the
    broker starts with those offline. KafkaStorageError for a directory given twice (also through
    a link), for none at all, or when none can be used."""
    usable: list[str] = []
    unusable: dict[str, str] = {}
    seen = set()
    for log_dir in dirs:
        path = os.path.abspath(log_dir)
        canonical = os.path.realpath(path)
        if canonical in seen:
            raise KafkaStorageError(f"duplicate log directory found: {', '.join(dirs)}")
        seen.add(canonical)
        if os.path.lexists(path) and not os.path.isdir(path):
            unusable[path] = f"{path} is not a directory"
            continue
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            unusable[path] = f"cannot create log directory {path}: {e}"
            continue
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            unusable[path] = f"{path} is not a readable and writable log directory"
            continue
        usable.append(path)
    if not usable and not unusable:
        raise KafkaStorageError("no log directories configured")
    if not usable:
        raise KafkaStorageError("none of the log directories can be used: " + "; ".join(unusable.values()))
    return usable, unusable


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
