"""`python -m tests.integration.daemon.faulty_disk FAULT PATH toposched-args...`: the real `toposched` in a
process whose disk misbehaves, for the tests of what the daemon says when the environment refuses.

- `full PATH`: once the file PATH exists, every write of the event log (`events.log._write_all`, the one
  place the log hands bytes to the OS) fails with ENOSPC, as on a full volume;
- `readonly PATH`: opening or creating anything under the directory PATH fails with EROFS, as on a
  read-only mount (tests run as root, whom file modes do not stop).
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any

import events.log
from daemon.cli.main import main


def _disk_full(trigger: Path) -> None:
    real_write_all = events.log._write_all

    def write_all(fd: int, data: bytes | bytearray) -> None:
        if trigger.exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write_all(fd, data)

    events.log._write_all = write_all


def _read_only(directory: Path) -> None:
    real_open, real_mkdir = os.open, os.mkdir
    inside = str(directory.resolve())

    def refused(path: Any) -> bool:
        return str(Path(os.fsdecode(path)).resolve()).startswith(inside)

    def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if refused(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    def mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        if refused(path) and not os.path.isdir(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        real_mkdir(path, mode, dir_fd=dir_fd)

    os.open = open_
    os.mkdir = mkdir


if __name__ == "__main__":
    fault, where, *arguments = sys.argv[1:]
    {"full": _disk_full, "readonly": _read_only}[fault](Path(where))
    raise SystemExit(main(arguments))
