"""One writer per state dir (SPEC §6): an exclusive `flock` on `<state_dir>/lock`.

`a2a-edge run` takes it before it opens the DB and holds it for its whole life; a CLI command
that changes state when no service answers takes it without waiting and holds it while it
writes. A lock held by another `run` means another service: exit 3, naming its pid. A lock held
by a CLI command is brief: the service waits for it (systemd's start timeout bounds the wait).

flock rather than a pid file: the kernel drops the lock when its holder dies, SIGKILL included,
so a stale file never keeps the service down. The pid and role written into the file are only
there to name the holder; the lock itself is the open file description, never the content.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from a2a_common.sqlite import StorageError

log = logging.getLogger(__name__)

LOCK_NAME = "lock"
SERVICE = "run"
CLI = "cli "  # + the command, e.g. "cli workflow.cancel"
POLL_S = 0.2  # how often a starting service looks again while a CLI command holds the lock


@dataclass(frozen=True)
class Holder:
    pid: int | None  # None: the holder has not written its pid yet (or the file is not ours)
    role: str  # "run", or "cli <command>"

    def __str__(self) -> str:
        who = self.role.removeprefix(CLI)
        return f"a2a-edge {who} (pid {self.pid if self.pid is not None else 'unknown'})"


class StateDirLocked(StorageError):
    """Another process holds the state dir's lock: a second service, or a CLI command."""

    def __init__(self, path: Path, holder: Holder) -> None:
        super().__init__(f"{path} is held by {holder}: one writer per state dir")
        self.path = path
        self.holder = holder


def _open(path: Path) -> int:
    """The lock file, created 0600; never through a symlink, never anything but a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StorageError(f"cannot create the state dir {path.parent}: {exc.strerror}") from exc
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        why = "it is a symlink" if exc.errno == errno.ELOOP else exc.strerror
        raise StorageError(f"cannot open the lock {path}: {why}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise StorageError(f"{path} is not a regular file")
    if stat.S_IMODE(info.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return fd


def _holder(fd: int) -> Holder:
    text = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
    pid_text, _, role = text.partition(" ")
    return Holder(int(pid_text) if pid_text.isdigit() else None, role or "unknown")


class StateLock:
    """The held lock; `release()` (or the end of the process) lets it go."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def take(cls, state_dir: Path, role: str) -> StateLock:
        """Take it now or raise `StateDirLocked` naming the holder; writes our pid and role."""
        path = state_dir / LOCK_NAME
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StateDirLocked(path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {role}\n".encode(), 0)
        return cls(fd, path)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None

    def __enter__(self) -> StateLock:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def for_service(state_dir: Path) -> StateLock:
    """The service's lock. Held by another service: `StateDirLocked` (exit 3). Held by a CLI
    command (or a holder that has not written its name yet): wait until it is done, saying once
    who is waited for."""
    waited_for: Holder | None = None
    while True:
        try:
            return StateLock.take(state_dir, SERVICE)
        except StateDirLocked as exc:
            if exc.holder.role == SERVICE:
                raise
            if exc.holder != waited_for:
                log.warning("waiting for %s to release %s", exc.holder, exc.path)
                waited_for = exc.holder
        time.sleep(POLL_S)


@contextlib.contextmanager
def for_cli(state_dir: Path, command: str) -> Iterator[StateLock]:
    """A CLI command's lock, taken without waiting, held while the block writes."""
    with StateLock.take(state_dir, CLI + command) as lock:
        yield lock


def held_by(state_dir: Path) -> Holder | None:
    """Who holds the state dir's lock now (None: nobody), without taking it or creating the
    file — `status` asks this, and a probe that took the lock even for an instant could make a
    starting service think another one runs. Linux's /proc/locks tells whether any process has
    a flock on the file's inode; the file names the holder."""
    path = state_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        holder = _holder(fd)
    finally:
        os.close(fd)
    device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        locks = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:  # no procfs: the pid in the file, if that process still lives
        return holder if holder.pid is not None and _alive(holder.pid) else None
    for line in locks.splitlines():
        parts = line.split()
        if "FLOCK" in parts and device in parts:
            return holder
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
