"""A disk that fails on demand: a FUSE passthrough filesystem (fusepy over Debian's libfuse2) that
mirrors a backing directory at a mount point, and answers EIO to every read, write, fsync, create
and directory change while a switch file exists. `FaultyFilesystem` mounts it in a child process
and always unmounts it (`fusermount -u`); `fail()` and `heal()` flip the switch.

Run as `python -m services.devcluster.faulty_fs BACKING MOUNT_POINT SWITCH_FILE` (foreground)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

from services.devcluster.proc import wait_until

MOUNT_TIMEOUT_S = 10.0


def unsupported_reason() -> str | None:
    """Why a FUSE filesystem cannot be mounted here, or None."""
    if os.geteuid() != 0:
        return "mounting needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount") is None:
        return "no fusermount"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as error:
        return f"fusepy cannot load libfuse: {error}"
    return None


def _operations(backing: str, switch: str):
    from fuse import FuseOSError, Operations

    class FailingPassthrough(Operations):
        """Every call goes to the same path under `backing`; data and metadata changes fail with
        EIO while `switch` exists."""

        def _path(self, path: str) -> str:
            return os.path.join(backing, path.lstrip("/"))

        def _check(self) -> None:
            if os.path.exists(switch):
                raise FuseOSError(errno.EIO)

        def getattr(self, path, fh=None):
            st = os.lstat(self._path(path))
            return {key: getattr(st, key) for key in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                                      "st_nlink", "st_size", "st_uid", "st_ino")}

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._path(path))]

        def statfs(self, path):
            st = os.statvfs(self._path(path))
            return {key: getattr(st, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                      "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        def access(self, path, amode):
            if not os.access(self._path(path), amode):
                raise FuseOSError(errno.EACCES)

        def chmod(self, path, mode):
            self._check()
            os.chmod(self._path(path), mode)

        def chown(self, path, uid, gid):
            self._check()
            os.chown(self._path(path), uid, gid)

        def utimens(self, path, times=None):
            os.utime(self._path(path), times)

        def mkdir(self, path, mode):
            self._check()
            os.mkdir(self._path(path), mode)

        def rmdir(self, path):
            self._check()
            os.rmdir(self._path(path))

        def unlink(self, path):
            self._check()
            os.unlink(self._path(path))

        def rename(self, old, new):
            self._check()
            os.rename(self._path(old), self._path(new))

        def truncate(self, path, length, fh=None):
            self._check()
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(self._path(path), length)

        # the kernel places O_APPEND writes itself: the backing file is written where it says
        def open(self, path, flags):
            return os.open(self._path(path), flags & ~os.O_APPEND)

        def create(self, path, mode, fi=None):
            self._check()  # fusepy does not pass the flags: opened for reading and writing
            return os.open(self._path(path), os.O_RDWR | os.O_CREAT, mode)

        def read(self, path, size, offset, fh):
            self._check()
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            self._check()
            return os.pwrite(fh, data, offset)

        def flush(self, path, fh):
            self._check()

        def fsync(self, path, datasync, fh):
            self._check()
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)

        def fsyncdir(self, path, datasync, fh):
            self._check()

        def release(self, path, fh):
            os.close(fh)

    return FailingPassthrough()


class FaultyFilesystem:
    """The filesystem of `backing` at `mount_point`, served by a child process; failing while
    `switch` exists."""

    def __init__(self, backing: Path, mount_point: Path, switch: Path) -> None:
        self.backing, self.mount_point, self.switch = Path(backing), Path(mount_point), Path(switch)
        self.process: subprocess.Popen | None = None

    def mounted(self) -> bool:
        return os.path.ismount(self.mount_point)

    def mount(self) -> FaultyFilesystem:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount_point.mkdir(parents=True, exist_ok=True)
        self.switch.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "services.devcluster.faulty_fs", str(self.backing), str(self.mount_point),
             str(self.switch)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: self.mounted() or self.process.poll() is not None, MOUNT_TIMEOUT_S, 0.05,
                       message=f"FUSE mount at {self.mount_point}")
            if not self.mounted():
                raise RuntimeError(f"FUSE mount at {self.mount_point} failed: {self.process.stderr.read().decode()}")
        except BaseException:
            self.unmount()
            raise
        return self

    def fail(self) -> None:
        """Every read, write, fsync and directory change answers EIO from now on."""
        self.switch.touch()

    def heal(self) -> None:
        self.switch.unlink(missing_ok=True)

    def unmount(self) -> None:
        """Unmounts (lazily, if files are still open) and ends the child process."""
        self.heal()
        if self.mounted():
            if subprocess.run(["fusermount", "-u", str(self.mount_point)], capture_output=True).returncode != 0:
                subprocess.run(["fusermount", "-u", "-z", str(self.mount_point)], capture_output=True)
        if self.process is not None:
            try:
                self.process.wait(timeout=MOUNT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def __enter__(self) -> FaultyFilesystem:
        return self.mount()

    def __exit__(self, *exc_info: object) -> None:
        self.unmount()


def main(argv: list[str]) -> None:
    from fuse import FUSE

    backing, mount_point, switch = argv
    FUSE(_operations(os.path.abspath(backing), os.path.abspath(switch)), mount_point, foreground=True,
         nothreads=False, allow_other=True)


if __name__ == "__main__":
    main(sys.argv[1:])
