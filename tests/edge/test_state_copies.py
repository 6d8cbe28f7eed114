"""The copies of the state DB beside it — pre-migration backups and WALs set aside after a
fault — follow retention, `storage.backup_keep_days` and every forget (SPEC §5.5). In-process:
the app over a real SQLite file and a manual clock; the copies are files named as the runtime
names them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, timedelta
from pathlib import Path

import pytest

from tests.edge.test_app import ROOT, Robot

DAY = 86400


def stamp(robot: Robot, days_ago: float) -> str:
    return (robot.clock.now() - timedelta(days=days_ago)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def copies(robot: Robot, days_ago: float, tag: str) -> list[Path]:
    """A backup and a set-aside WAL made `days_ago`, each holding `tag`."""
    state = Path(robot.settings.state_dir)
    (state / "backups").mkdir(mode=0o700, exist_ok=True)
    made = [
        state / "backups" / f"state-v20-{stamp(robot, days_ago)}.db",
        state / f"state.db-wal.orphaned-{stamp(robot, days_ago)}",
    ]
    for path in made:
        path.write_bytes(f"words of {tag}".encode())
    return made


@pytest.fixture
def robot(tmp_path: Path) -> Iterator[Robot]:
    robot = Robot(tmp_path, live=False)  # storage.backup_keep_days: 7 by default
    yield robot
    asyncio.run(robot.app.close())


def test_copies_older_than_backup_keep_days_go_younger_stay(robot: Robot) -> None:
    old, young = copies(robot, 8, "old"), copies(robot, 6, "young")
    tmp = Path(robot.settings.state_dir) / "backups" / ".state-v20-20260101T000000Z.db.x.tmp"
    tmp.write_bytes(b"half a copy")  # a crash in the middle of a copy leaves one
    notes = Path(robot.settings.state_dir) / "backups" / "operator-notes.txt"
    notes.write_text("mine")
    assert robot.app.sweep() is False  # nothing in the DB to expire
    assert [p.exists() for p in old + young] == [False, False, True, True]
    assert notes.exists() and tmp.exists()  # a tmp has no age: a forget takes it


def test_a_retention_pass_that_removes_anything_removes_every_copy(robot: Robot) -> None:
    robot.app.dead_letter(f"{ROOT}/turn/request", b"old words", "boom")
    robot.clock.advance(8 * DAY)
    young = copies(robot, 1, "a copy made while the dead letter was kept")
    assert robot.app.sweep() is True  # the dead letter was pruned: the copy held it
    assert [p.exists() for p in young] == [False, False]


def test_every_forget_removes_every_copy(robot: Robot) -> None:
    state = Path(robot.settings.state_dir)
    tmp = state / "backups" / ".state-v20-20260101T000000Z.db.x.tmp"
    for n, (scope, target) in enumerate(
        [("pair", "p-none"), ("session", "s-none"), ("profile_key", "hobby"), ("all", None)]
    ):
        made = copies(robot, 0, scope)
        tmp.write_bytes(b"half a copy")
        args = {"scope": scope} if target is None else {"scope": scope, "id": target}
        answer = robot.admin(f"f-{n}", "memory.forget", **args)
        assert answer["ok"] is True, answer
        assert [p.exists() for p in [*made, tmp]] == [False, False, False], scope
