"""One trace row per workflow change (issue 36): the unit of work an input is writes one
`workflow_trace` row per workflow it changed, and every reader — `timeline()`, the console's
workflow page, `workflows trace` (both through `edge.views.state.workflow_trace`) — tells the
same story, entry for entry, as the rows of one entry each that the runtime wrote before."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from edge.channel.topics import PuiEventMsg
from edge.views import console
from edge.views import state as views
from taskmanager.store import WorkflowStore
from tests.edge.test_app import MOVE, PURIFY, Robot


def rows(robot: Robot) -> int:
    return int(robot.rows("SELECT count(*) FROM workflow_trace")[0][0])


def story(robot: Robot) -> tuple[list[int], list[dict[str, Any]]]:
    """A workflow's life; the trace rows each input added, and the timeline it leaves."""
    added = []
    inputs: list[Callable[[], object]] = [
        robot.push,
        lambda: robot.callback(MOVE, 1, "RUNNING"),
        lambda: robot.callback(MOVE, 2, "COMPLETED", evidence={"arrived_room": "안방"}),
        lambda: robot.app.take_pui(PuiEventMsg(event_id="e1", kind="cancel"), robot.arrival("p")),
        lambda: robot.callback(PURIFY, 1, "CANCELLED"),
    ]
    for take in inputs:
        before = rows(robot)
        take()
        robot.clock.advance(1)
        added.append(rows(robot) - before)
    return added, robot.app.tm.store.timeline("wf-1")


def test_one_change_writes_one_trace_row_and_every_reader_shows_each_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    robot = Robot(tmp_path / "grouped")
    added, timeline = story(robot)
    assert added == [1, 1, 1, 1, 1]  # one row per input, each changing one workflow
    # the callback that dispatched the purifier: its row holds the move's end and the dispatch
    statuses = [e.get("status") for e in timeline if e["kind"] == "event"]
    assert statuses[3:5] == ["COMPLETED", "DISPATCHED"]
    sent = [e["status"] for e in robot.wire.on("workflow/event") if e["status"] != "PROGRESS"]
    assert statuses == sent  # every event on the wire is in the trace, in order
    shown = views.workflow_trace(robot.settings, "wf-1")
    assert shown is not None and shown["timeline"] == timeline  # `workflows trace`
    page = console.workflow(robot.settings, "wf-1")
    assert page is not None
    assert page["timeline"] == [{**e, "phase": console.phase_of(e)} for e in timeline]
    asyncio.run(robot.app.close())

    # the same inputs traced one row per entry, as before issue 36: the same timeline
    monkeypatch.setattr(WorkflowStore, "change", lambda _self: contextlib.nullcontext())
    before = Robot(tmp_path / "per-entry")
    added_before, timeline_before = story(before)
    assert timeline_before == timeline
    assert sum(added_before) > sum(added)
    asyncio.run(before.app.close())
