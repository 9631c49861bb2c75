"""CRC-32C (Castagnoli), as RecordBatch v2 uses it, for the storage engine's checks of batches.

`crc32c(data, value=0)` takes any bytes-like object (a memoryview slice is read in place) and
continues from `value`, as the `crc32c` package's function does. It is `fastcrc`'s `crc32.iscsi`
(carry-less multiplication, with VPCLMULQDQ where the CPU has it: ~11 µs per MiB where the `crc32c`
package's SSE4.2 loop takes ~38 µs), or the `crc32c` package's when fastcrc is not installed.
"""

from __future__ import annotations

try:
    from fastcrc.crc32 import iscsi as crc32c
except ImportError:  # pragma: no cover - fastcrc is a dependency; the codec's package still works
    from crc32c import crc32c

__all__ = ["crc32c"]
