from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_common.clock import Clock, ManualClock
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from edge.store.schema import MIGRATIONS


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def memory(tmp_path: Path, clock: Clock) -> Iterator[Memory]:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    yield Memory(db=db, clock=clock, policy=MemoryPolicy())
    db.close()
