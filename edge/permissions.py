"""Start-up checks of what the runtime keeps private: the state DB and the secret files."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from edge.config import Settings

log = logging.getLogger(__name__)


def check_permissions(settings: Settings) -> list[str]:
    """Tighten the state DB to 0600 and warn about secrets others can read; returns warnings."""
    warnings = []
    db = settings.state_db_path
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            os.chmod(path, 0o600)
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
