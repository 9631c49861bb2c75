"""The C heap settings of a service process that moves large record buffers (broker, gateway).

glibc hands freed memory back to the kernel as soon as the top of a heap holds more than 128 KiB
free, and serves each allocation above its mmap threshold with a fresh mapping: a process that
allocates and frees buffers of megabytes per fetch (gRPC messages, decompressed batches, Arrow
columns) then pays the kernel's page faults and zeroing for every buffer. `keep_freed_heap` raises
both limits, so such buffers reuse memory the process already has; its resident size stays at
its high-water mark instead. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024  # glibc's largest mmap threshold on 64-bit


def keep_freed_heap() -> bool:
    """Sets the thresholds above; True when the C library took them."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)) and bool(mallopt(M_MMAP_THRESHOLD,
                                                                                   MMAP_THRESHOLD_BYTES))
