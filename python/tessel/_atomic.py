"""Files that appear whole or not at all: written under a hidden temporary name, then renamed."""

import errno
import os
import re
import secrets
import socket
import stat
from pathlib import Path

# As Tessel's C++ writers name theirs: ".NAME.tmp-RANDOM-PID-PIDNS-HOST", NAME cut to 140
# characters, RANDOM 16 of [0-9a-z] from the kernel's random source, PIDNS the inode of the pid
# namespace (0 when /proc does not tell it), HOST the host name with anything but letters,
# digits and '-' as '_' (at most 64). A later `tessel` run writing the same output removes such a
# temporary once its maker is provably gone (same host and namespace, no such process).
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def _maker():
    host = re.sub(r"[^A-Za-z0-9-]", "_", socket.gethostname())[:64] or "_"
    try:
        match = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
        namespace = int(match.group(1)) if match else 0
    except OSError:
        namespace = 0
    return host, namespace


def _temporary_name(name):
    host, namespace = _maker()
    random = "".join(_ALPHABET[b % 36] for b in secrets.token_bytes(16))
    return f".{name[:140]}.tmp-{random}-{os.getpid()}-{namespace}-{host}"


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
    """Writes `target` through `.NAME.tmp-RANDOM-PID-PIDNS-HOST` in the same folder, as Tessel's
    C++ writers do: the temporary is created exclusively (never through a symbolic link, never a
    name that already exists) with a name nobody can guess, and a replaced file keeps its mode.

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
        self._mode = stat.S_IMODE(mode) if mode is not None else None
        self.temp_path = target.parent / _temporary_name(target.name)

    def __enter__(self):
        # Exclusively ours before anything writes it by name: O_EXCL refuses a name that
        # exists, a symbolic link included.
        fd = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o666)
        os.close(fd)
        return self

    def __exit__(self, kind, value, traceback):
        if kind is not None:
            self._remove_temp()
            return False
        try:
            # Durable before visible: the data reaches the disk before the name does.
            _sync(self.temp_path)
            if self._mode is not None:
                os.chmod(self.temp_path, self._mode)
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
