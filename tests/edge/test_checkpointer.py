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


def test_a_forget_truncates_the_wal_even_while_the_checkpointer_runs(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "state.db"
    db = open_state_db(path, MIGRATIONS)
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("CREATE TABLE filler (x TEXT)")
    checkpointer = Checkpointer(path, busy_timeout_ms=1000)
    stop = threading.Event()

    def checkpoint_all_the_time() -> None:
        while not stop.is_set():
            checkpointer._checkpoint()

    worker = threading.Thread(target=checkpoint_all_the_time)
    worker.start()
    try:
        results = []
        for n in range(100):
            with db.atomic():
                db.execute("INSERT INTO filler VALUES (?)", ["x" * 2000 + str(n)])
            results.append(checkpointer.truncate())
    finally:
        stop.set()
        worker.join(10)
        checkpointer.close()
    assert all(results)  # without the shared lock most of these came back busy
    assert Path(f"{path}-wal").stat().st_size == 0
    db.close()
