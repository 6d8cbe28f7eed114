"""A turn id that comes again after its dedupe mark was pruned (`mqtt.dedupe_keep_days`) while
its utterance is still stored is refused `duplicate_turn_id`: its answer is no longer kept, and
nothing runs twice. Before: the utterance's second insert broke `pairs.turn_id`'s uniqueness,
the turn was answered `internal_error` and kept as a dead letter (found by the device
simulator's routine across days, seed 2 at 400 steps)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.channel.mqtt import Inbound
from tests.edge.test_app import ROOT
from tests.edge.test_door import Stage


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Stage]:
    stage = Stage(tmp_path)
    yield stage
    asyncio.run(stage.app.close())


def turn(mid: int) -> Inbound:
    body = {"turn_id": "t-1", "recognized_text": "안녕"}
    return Inbound(f"{ROOT}/turn/request", json.dumps(body).encode(), 1, mid, 1, False)


def test_a_turn_id_back_after_its_mark_was_pruned_is_refused_not_crashed(stage: Stage) -> None:
    async def say(mid: int) -> None:
        stage.runtime._intake.take([turn(mid)])
        await asyncio.gather(*stage.app.turns_in_flight)

    asyncio.run(say(1))
    first = [r for r in stage.robot.wire.on("turn/response") if r["turn_id"] == "t-1"]
    assert [r["status"] for r in first] == ["ok"]
    stage.robot.clock.advance(8 * 86400)  # past mqtt.dedupe_keep_days (7): the mark goes
    while stage.app.sweep():
        pass
    assert stage.rows("SELECT count(*) FROM pairs WHERE turn_id = 't-1'") == [(1,)]
    asyncio.run(say(2))
    answers = [r for r in stage.robot.wire.on("turn/response") if r["turn_id"] == "t-1"]
    assert [(r["status"], r.get("error")) for r in answers[1:]] == [
        ("rejected", "duplicate_turn_id")
    ]
    assert stage.rows("SELECT count(*) FROM inbox_dead") == [(0,)]
    assert stage.channel.acked == [1, 2]
