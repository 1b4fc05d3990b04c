"""Files that appear whole or not at all: written under a hidden temporary name, then renamed."""

import errno
import itertools
import os
import stat
from pathlib import Path

_counter = itertools.count()


def _sync(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError as e:
        # Some file systems (tmpfs for folders, some FUSE mounts) do not sync folders.
        if not (directory and e.errno in (errno.EINVAL, errno.ENOTSUP)):
            raise
    finally:
        os.close(fd)


class AtomicOutput:
    """Writes `target` through `.NAME.tmp-PID-N` in the same folder, as Tessel's C++ writers do.

    A context manager: the block writes `temp_path`. Leaving it normally syncs the temporary and
    renames it into place; leaving it by an exception removes the temporary and leaves whatever
    `target` held untouched. The checks on `target` run in the constructor, before any writing.
    """

    def __init__(self, target):
        target = Path(os.fspath(target))
        if not target.name:
            raise ValueError(f"output path {str(target)!r} names no file")
        if not target.parent.is_dir():
            raise ValueError(f"cannot write {target}: folder {target.parent} does not exist")
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise ValueError(f"cannot write {target}: it is a folder, expected a file name")
        # A rename replaces whatever the name is: refuse devices, pipes, sockets and links.
        if mode is not None and not stat.S_ISREG(mode):
            raise ValueError(f"cannot write {target}: it exists and is not a regular file; "
                             "give another output name")
        self.target = target
        self.temp_path = target.parent / f".{target.name[:200]}.tmp-{os.getpid()}-{next(_counter)}"

    def __enter__(self):
        self._remove_temp()
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None:
            self._remove_temp()
            return False
        try:
            # Durable before visible: the data reaches the disk before the name does.
            _sync(self.temp_path)
            os.replace(self.temp_path, self.target)
        except BaseException:
            self._remove_temp()
            raise
        _sync(self.target.parent, directory=True)
        return False

    def _remove_temp(self):
        try:
            self.temp_path.unlink()
        except FileNotFoundError:
            pass
