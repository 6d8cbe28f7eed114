"""The README's upgrade story: migrations are automatic (with a copy first), a downgrade is
refused at start with a message that says what to do, and the refused DB is left untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from edge.store.schema import MIGRATIONS
from tests.conftest import RuntimeFactory


def test_a_db_from_a_newer_schema_is_refused_untouched(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    runtime = runtime_factory()
    assert runtime.terminate() == 0
    db = tmp_path / "state" / "state.db"
    newer = len(MIGRATIONS) + 3  # what a later a2a-edge would have left
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={newer}")
    conn.commit()
    conn.close()  # the last connection: its WAL is copied into state.db and removed
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    done = subprocess.run(
        [sys.executable, "-m", "edge", "run", "--config", str(runtime.config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 3  # RestartPreventExitStatus: systemd does not loop on it
    assert done.stderr.strip().splitlines()[-1] == (
        f"a2a-edge: state DB: {db} has schema version {newer}, newer than this a2a-edge knows"
        f" ({len(MIGRATIONS)}); upgrade a2a-edge or restore a backup taken before the upgrade"
    )
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert not (db.parent / "backups").exists()  # nothing migrated, nothing copied
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == newer
    conn.close()
