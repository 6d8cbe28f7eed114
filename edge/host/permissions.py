"""Start-up checks of what the runtime keeps private: the state dir, the state DB and the secret
files."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from edge.config.settings import Settings

log = logging.getLogger(__name__)


def _tighten(path: Path) -> int | None:
    """chmod 600 through a descriptor that cannot follow a symlink (the start-up check refuses
    a symlinked DB; this must not change the mode of whatever the link points at meanwhile).
    The old mode when it was opened up, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # absent, a symlink, unreadable: the start-up check says which
        return None
    try:
        info = os.fstat(fd)
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISREG(info.st_mode) or not mode & 0o077:
            return None
        os.fchmod(fd, 0o600)
        return mode
    except OSError:  # e.g. an immutable file: opening it for writing will say so
        return None
    finally:
        os.close(fd)


def _open_dir(path: Path) -> str | None:
    """A warning when group or others may write the state dir: whoever can write it can
    replace state.db or its WAL, plant a symlink, or take the lock. Not changed here (the
    operator chose the mode, perhaps for a group); the DB files in it are kept 0600."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:  # the start-up check says why it cannot be used
        return None
    if not mode & 0o022:
        return None
    who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if mode & bit)
    return (
        f"state dir {path} is mode {mode:o}: {who} can write it (replace state.db, its WAL or"
        f" the lock); chmod go-w {path}"
    )


def check_permissions(settings: Settings) -> list[str]:
    """Warn about a state dir others can write, tighten the state DB to 0600 and warn about
    secrets others can read; returns the warnings."""
    warnings = []
    db = settings.state_db_path
    opened = _open_dir(db.parent)
    if opened:
        warnings.append(opened)
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        mode = _tighten(path)
        if mode is not None:
            warnings.append(f"{path} was mode {mode:o}; set to 600")
    for key, name in (
        ("mqtt.password_file", settings.mqtt.password_file),
        ("cloud.token_file", settings.cloud.token_file),
        ("mqtt.tls_key_file", settings.mqtt.tls_key_file),
    ):
        if name and Path(name).exists() and Path(name).stat().st_mode & 0o004:
            warnings.append(f"{key} {name} is readable by everybody; chmod o-r it")
    for line in warnings:
        log.warning("%s", line)
    return warnings
