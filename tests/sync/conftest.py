from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_common.clock import ManualClock
from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from sync.outbox import SyncOutbox


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def state_db(tmp_path: Path) -> Iterator[Database]:
    db = open_state_db(tmp_path / "state.db", MIGRATIONS)
    yield db
    db.close()


@pytest.fixture
def outbox(state_db: Database, clock: ManualClock) -> SyncOutbox:
    return SyncOutbox(db=state_db, clock=clock)
