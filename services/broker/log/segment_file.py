"""`SegmentFile`: the handling a segment's `.log`, `.index` and `.timeindex` files share as files.

It owns how those files are opened (read-write, close-on-exec, created with mode 0644), the
descriptor a subclass keeps open for writing, length changes and fsync through that descriptor
(or through the path while none is open), and unlinking and renaming (a new suffix or another
directory). A kept descriptor is closed by `_close_fd`, or, for a file deleted while readers may
still hold it, when the last reference to the object goes, so an in-flight read never sees a
recycled descriptor. What the files hold belongs to the subclasses (`file_records`, `index`).

A file may be created lazily: the object of a new segment that has not held a batch yet need not
have its file (`on_disk` False) until `create_file`, which the segment calls before its first
write; until then length changes, flushes and renames have nothing to do on disk.
"""

from __future__ import annotations

import os
import weakref

from services.broker.log.files import fsync_path, rename_file, unlink_if_exists

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def open_fd(path: str, *, create: bool = False, read_only: bool = False) -> int:
    """A new descriptor of the segment file `path` (created if asked and missing)."""
    flags = (os.O_RDONLY if read_only else os.O_RDWR) | _CLOEXEC
    if create:
        return os.open(path, flags | os.O_CREAT, 0o644)
    return os.open(path, flags)


class SegmentFile:
    def __init__(self, path: str, *, on_disk: bool = True) -> None:
        self.path = path
        self.on_disk = on_disk  # False until `create_file` for a file created lazily
        self._fd: int | None = None  # the kept descriptor: writes, length changes and fsyncs use it
        self._fd_closer: weakref.finalize | None = None

    def _keep_fd(self, fd: int) -> int:
        """Keeps `fd` open until `_close_fd`, or until this object is no longer referenced."""
        self._fd = fd
        self._fd_closer = weakref.finalize(self, os.close, fd)
        return fd

    def _close_fd(self) -> None:
        """Closes the kept descriptor (once; a late read through its number then fails with EBADF)."""
        if self._fd_closer is not None:
            self._fd_closer()

    @property
    def closed(self) -> bool:
        """True once the kept descriptor has been closed (False while none was ever kept)."""
        return self._fd_closer is not None and not self._fd_closer.alive

    def create_file(self) -> None:
        """Creates the file of an object made without it (see the module doc); a no-op after."""
        if self.on_disk:
            return
        fd = open_fd(self.path, create=True)
        try:
            kept = self._on_file_created(fd)
        except BaseException:
            os.close(fd)
            raise
        self.on_disk = True
        if not kept:
            os.close(fd)

    def _on_file_created(self, fd: int) -> bool:
        """Sizes the new file; returns whether `fd` was kept as the object's descriptor."""
        return False

    def _set_file_length(self, size: int) -> None:
        """Cuts or extends the file to `size` bytes (through the kept descriptor if any)."""
        if self._fd is not None:
            os.ftruncate(self._fd, size)
        elif self.on_disk:
            os.truncate(self.path, size)

    def flush(self) -> None:
        """Makes the file's data durable; a file deleted meanwhile has nothing left to flush."""
        if not self.on_disk:
            return
        if self._fd is not None:
            os.fsync(self._fd)
            return
        try:
            fsync_path(self.path)
        except FileNotFoundError:
            pass

    def delete_if_exists(self) -> bool:
        """Unlinks the file; a kept descriptor or mapping stays valid for readers still holding it."""
        return unlink_if_exists(self.path)

    def rename_to(self, path: str) -> None:
        if self.on_disk:
            rename_file(self.path, path)
        self.path = path

    def update_dir(self, new_dir: str) -> None:
        """Follows the file to `new_dir`, where its directory was renamed."""
        self.path = os.path.join(new_dir, os.path.basename(self.path))
