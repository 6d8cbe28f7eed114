"""The user's words a WorkflowStore keeps (SPEC 5.5; docs/design.md "A step's words live as long
as the step"), on a real SQLite file: an ended step's args are never stored, a forget marks the
active workflows so that each later step end owes a WAL truncation, and a forget of some turns
reaches a workflow whose trace alone quotes them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from a2a_common.db import Database
from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from taskmanager.model import Workflow
from taskmanager.store import WorkflowStore
from tests.taskmanager.helpers import MOVE_PURIFY, T0, workflow

WORDS = "현관 수국꽃 암호를 말해줘"


def ended_first(wf: Workflow) -> Workflow:
    first, *rest = wf.steps
    return dataclasses.replace(wf, steps=[dataclasses.replace(first, status="COMPLETED"), *rest])


def stored_args(db: Database, workflow_id: str) -> dict[str, Any]:
    (doc,) = db.execute("SELECT doc FROM workflows WHERE workflow_id = ?", [workflow_id]).fetchone()
    return {s["step_id"]: s["args"] for s in json.loads(doc)["steps"]}


def test_an_ended_steps_args_are_not_stored_and_a_forget_owes_a_truncation_at_each_end(
    tmp_path: Path,
) -> None:
    db = open_state_db(tmp_path / "s.db", MIGRATIONS)
    store = WorkflowStore(db=db)
    wf = workflow(MOVE_PURIFY, workflow_id="wf-a")
    first, second = (s.step_id for s in wf.steps)
    assert wf.steps[0].args and wf.steps[1].args
    with db.atomic():
        store.save(wf, T0)
        store.save(ended_first(wf), T0)
    assert stored_args(db, "wf-a") == {first: {}, second: wf.steps[1].args}
    assert store.take_scrub() is False  # no forget reached it: no truncation owed
    with db.atomic():
        store.forget_all()
        store.save(ended_first(wf), T0)  # a save after the forget: nothing newly ended
    assert store.take_scrub() is False
    both = dataclasses.replace(
        wf, steps=[dataclasses.replace(s, status="COMPLETED") for s in wf.steps]
    )
    with db.atomic():
        store.save(both, T0)
    assert stored_args(db, "wf-a") == {first: {}, second: {}}
    assert store.take_scrub() is True and store.take_scrub() is False
    db.close()


def test_a_forget_of_turns_reaches_a_trace_that_alone_quotes_them(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "s.db", MIGRATIONS)
    store = WorkflowStore(db=db)
    with db.atomic():
        for workflow_id in ("wf-asked", "wf-other"):
            store.save(workflow(MOVE_PURIFY, workflow_id=workflow_id), T0)
        # an answered ask: the question is gone from the document, its trace row keeps it
        store.trace("wf-asked", T0, 2, "decision", {"question": "수국꽃 암호를 다시 말할까요?"})
        store.trace("wf-other", T0, 2, "decision", {"question": "창문을 열까요?"})
    with db.atomic():
        ended, traces = store.forget_words(["t-gone"], [WORDS])
    assert (ended, traces) == ([], 1)
    assert [r[0] for r in db.execute("SELECT workflow_id FROM workflow_trace")] == ["wf-other"]
    assert store.get("wf-asked") is not None  # active: it keeps running
    db.close()
