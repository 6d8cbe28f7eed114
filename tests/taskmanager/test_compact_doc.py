"""The stored workflow document leaves out the fields still at their default (issue 36): it loads
back to the same workflow, a document stored in full before still loads, readers are shown every
field, and the defaults it relies on are pinned (changing one changes what stored rows mean)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from a2a_common import jsonx
from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from taskmanager.model import (
    _STEP_DEFAULTS,
    _WF_DEFAULTS,
    Step,
    Workflow,
    full_json,
    workflow_from_json,
    workflow_to_json,
)
from taskmanager.store import WorkflowStore
from tests.taskmanager.helpers import T0, workflow


def stored(wf: Workflow) -> Workflow:
    return workflow_from_json(json.loads(jsonx.dumps(workflow_to_json(wf))))


def busy() -> Workflow:
    """A workflow with most fields away from their default, ints where floats are usual."""
    wf = workflow()
    first, second = wf.steps
    first = replace(
        first,
        status="RUNNING",
        timeout_s=0,  # an int 0: kept, or it would load back as the default's 0.0
        attempt=2,
        last_seq=3,
        progress=0.5,
        ready_seq=1,
        dispatched_at=T0,
        deadline=T0 + timedelta(seconds=120),
        evidence={"arrived_room": "안방"},
        effects_met=["room_reached"],
        boot_id="b1",
        continued=True,
    )
    wait = Step(step_id="pause", kind="wait", wait_s=3, depends_on=[first.step_id])
    return replace(
        wf,
        steps=[first, second, wait],
        status="running",
        etag=4,
        question="창문을 닫을까요?",
        ask_deadline=T0 + timedelta(seconds=300),
        decisions_used=1,
        decision_events=["FAILED"],
        person_id="p-1",
        turn_id="t-1",
        created_at=T0,
    )


def test_a_stored_document_loads_back_to_the_same_workflow() -> None:
    for wf in (workflow(), busy(), replace(workflow(), steps=[])):
        assert stored(wf) == wf
    loaded = stored(busy())
    assert type(loaded.steps[0].timeout_s) is int and type(loaded.steps[2].wait_s) is int


def test_the_document_leaves_out_defaults_but_keeps_what_raw_readers_look_at() -> None:
    doc = workflow_to_json(workflow())
    assert {"workflow_id", "status", "etag", "steps"} <= set(doc)
    assert "question" not in doc and "decision_events" not in doc
    for step in doc["steps"]:
        kept = {"step_id", "kind", "capability_id", "operation_id", "status", "args", "evidence"}
        assert kept <= set(step)
        assert "progress" not in step and "effects_met" not in step
    # a two-step workflow's row fits one 1 KiB page (at most 989 bytes of a row stay in its
    # leaf); in full it took an overflow page more, each one written at every change
    assert len(jsonx.dumps(full_json(workflow())).encode()) > 1000
    assert len(jsonx.dumps(doc).encode()) < 700


def test_a_document_stored_in_full_before_still_loads() -> None:
    for wf in (workflow(), busy()):
        assert workflow_from_json(json.loads(jsonx.dumps(full_json(wf)))) == wf


def test_readers_are_shown_every_field(tmp_path: Path) -> None:
    db = open_state_db(tmp_path / "s.db", MIGRATIONS)
    store = WorkflowStore(db=db)
    wf = busy()
    with db.atomic():
        store.save(wf, T0)
    assert store.get(wf.workflow_id) == full_json(wf)
    assert store.load(wf.workflow_id) == wf
    assert store.get("nope") is None and store.load("nope") is None


def test_the_defaults_stored_documents_rely_on_are_pinned() -> None:
    """Changing one changes what rows already stored mean: migrate them (full documents) first."""
    assert dict(_STEP_DEFAULTS) == {
        "depends_on": [],
        "timeout_s": 0.0,
        "ack_timeout_s": 0.0,
        "wait_s": 0.0,
        "resource": None,
        "cancelable": True,
        "reason": None,
        "attempt": 0,
        "last_seq": 0,
        "progress": None,
        "ready_seq": None,
        "dispatched_at": None,
        "ack_deadline": None,
        "deadline": None,
        "wait_until": None,
        "continued": False,
        "effects_met": [],
        "boot_id": None,
        "on_agent_lost": "fail",
        "on_restart": "fail",
        "epoch_attempt": 0,
    }
    assert dict(_WF_DEFAULTS) == {
        "plan_id": "",
        "source": "planner",
        "experience": None,
        "experience_refusal": None,
        "experience_state": None,
        "effect_bindings": {},
        "subscriptions": [],
        "refused_events": [],
        "refused_experience_id": None,
        "criteria_asked": False,
        "observations_seen": 0,
        "decisions_used": 0,
        "replans_used": 0,
        "max_decisions": 3,
        "max_replans": 1,
        "decision_events": ["FAILED", "BLOCKED", "TIMEOUT", "NEEDS_USER_INPUT"],
        "terminal_events": ["COMPLETED", "CANCELLED", "WORKFLOW_COMPLETED"],
        "awaiting_decision": None,
        "ask_deadline": None,
        "question": None,
        "cancel_reason": None,
        "end_reason": None,
        "turn_id": None,
        "pair_id": None,
        "session_id": None,
        "person_id": "household",
        "created_at": None,
    }
