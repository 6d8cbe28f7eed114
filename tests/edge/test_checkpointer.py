"""WAL checkpoints in a worker thread on a connection of their own."""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2a_common.sqlite import open_state_db
from edge.checkpointer import Checkpointer
from edge.schema import MIGRATIONS


def test_the_writer_never_checkpoints_and_the_worker_copies_the_wal_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db = open_state_db(path, MIGRATIONS)
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE filler (x TEXT)")
    for n in range(300):  # far past the 1000-page default if pages were checkpointed inline
        with db.atomic():
            db.execute("INSERT INTO filler VALUES (?)", ["x" * 8000 + str(n)])
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > 1000 * 4096  # nothing was checkpointed by the commits
    checkpointer = Checkpointer(path, busy_timeout_ms=1000)

    async def two_runs() -> None:
        task = asyncio.create_task(checkpointer.run(every_s=0.01))
        while checkpointer.runs < 2:
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(asyncio.wait_for(two_runs(), 10))
    frames, copied = checkpointer._checkpoint()
    assert frames > 0 and copied == frames  # every frame is back in the database file
    assert db.execute("SELECT count(*) FROM filler").fetchone()[0] == 300
    db.close()
