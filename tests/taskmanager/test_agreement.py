"""Evidence must agree with the command it answers (SPEC §4.5): an `arrived_room` other than
the commanded `room`, a `purifier_mode` other than the commanded `mode`, proves nothing. In an
active experience the step ends FAILED `evidence_mismatch` (a decision event); in shadow and
outside an experience it completes and the trace marks it contradicted. The correspondence is
data: the catalog's `terminal_evidence` entry names the argument (`{"key", "arg"}`)."""

from __future__ import annotations

import copy
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from taskmanager.catalog import load_catalog, parse_catalog
from taskmanager.effects import load_effects, parse_effects
from taskmanager.errors import CatalogError, EffectsError
from taskmanager.events import Callback
from taskmanager.evidence import screen_evidence
from tests.taskmanager.helpers import T0, ReportSink
from tests.taskmanager.test_service import manager

CATALOG = load_catalog()
ROOM = "안방"
OTHER_ROOM = "거실"


def move_plan(room: str = ROOM, experience: bool | str = True, **over: Any) -> dict[str, Any]:
    """A move to `room` then a purifier start, with a contract wanting both effects."""
    steps = [
        {"step_id": "go", "capability_id": "mobility", "operation_id": "move_to_room",
         "args": {"room": room}},
        {"step_id": "air", "capability_id": "air_purifier", "operation_id": "start",
         "args": {"mode": "auto"}, "depends_on": ["go"]},
    ]  # fmt: skip
    contract = {
        "contract_version": "a2a-experience-policy-v1",
        "experience_id": "exp-move",
        "goal_summary": "",
        "desired_effects": ["arrived_in_room", "air_purified"],
        "success_criteria": ["arrived_in_room"],
        "plan_binding": {"plan_id": "room_clean", "step_ids": ["go", "air"], "step_count": 2},
        **over,
    }
    return {
        "workflow_id": "wf-m",
        "plan_id": "room_clean",
        "steps": steps,
        "experience": contract if experience else None,
    }


def run_move(
    tmp_path: Path, evidence: Any, *, mode: str = "enforce", **plan: Any
) -> tuple[Any, ReportSink]:
    clock = ManualClock(T0)
    sink = ReportSink()
    tm, _ = manager(tmp_path / "s.db", clock, sink)
    tm.mode = mode
    assert tm.submit(move_plan(**plan), source="planner").accepted == ["wf-m"]
    tm.callback(Callback("wf-m:go", 1, "RUNNING"))
    tm.callback(Callback("wf-m:go", 2, "COMPLETED", evidence=evidence))
    return tm, sink


def evidence_rows(tm: Any) -> list[dict[str, Any]]:
    return [e for e in tm.store.timeline("wf-m") if e["kind"] == "evidence"]


def step(tm: Any, step_id: str) -> dict[str, Any]:
    doc = tm.store.get("wf-m")
    return next(s for s in doc["steps"] if s["step_id"] == step_id)


def test_another_room_than_the_commanded_one_fails_the_step_in_an_experience(
    tmp_path: Path,
) -> None:
    """Before: the move to 안방 that arrived in 거실 was COMPLETED, `arrived_in_room` met, and
    the purifier started in the wrong room."""
    tm, sink = run_move(tmp_path, {"arrived_room": OTHER_ROOM})
    assert step(tm, "go")["status"] == "FAILED", step(tm, "go")
    assert step(tm, "go")["reason"] == "evidence_mismatch"
    failed = [r for r in sink.reports if r.body["event"]["status"] == "FAILED"]
    assert failed and failed[0].decision_requested
    assert failed[0].body["event"]["reason"] == "evidence_mismatch"
    (row,) = evidence_rows(tm)
    assert row["verified"] is False and row["contradicted"] == ["arrived_room"], row
    assert row["missing"] == ["arrived_in_room"]
    assert step(tm, "go")["effects_met"] == []
    assert step(tm, "air")["status"] == "QUEUED"  # nothing started in the wrong room


@pytest.mark.parametrize(
    "arrived",
    [
        ROOM,
        unicodedata.normalize("NFD", ROOM),  # the same room, its syllables decomposed
    ],
)
def test_the_commanded_room_as_people_read_it_proves_the_move(tmp_path: Path, arrived: str) -> None:
    tm, sink = run_move(tmp_path, {"arrived_room": arrived})
    assert step(tm, "go")["status"] == "COMPLETED"
    assert step(tm, "go")["effects_met"] == ["arrived_in_room"]
    (row,) = evidence_rows(tm)
    assert row["verified"] is True and "contradicted" not in row, row
    assert not [r for r in sink.reports if r.body["event"]["status"] == "FAILED"]


def test_a_composed_command_and_decomposed_evidence_agree(tmp_path: Path) -> None:
    tm, _ = run_move(tmp_path, {"arrived_room": ROOM}, room=unicodedata.normalize("NFD", ROOM))
    assert step(tm, "go")["status"] == "COMPLETED"


def test_another_purifier_mode_than_the_commanded_one_is_a_mismatch(tmp_path: Path) -> None:
    tm, sink = run_move(tmp_path, {"arrived_room": ROOM})
    tm.callback(Callback("wf-m:air", 1, "COMPLETED", evidence={"purifier_mode": "turbo"}))
    assert (step(tm, "air")["status"], step(tm, "air")["reason"]) == (
        "FAILED",
        "evidence_mismatch",
    )
    failed = [r.body["event"] for r in sink.reports if r.body["event"]["status"] == "FAILED"]
    assert [e["reason"] for e in failed] == ["evidence_mismatch"]


def test_a_step_no_effect_is_bound_to_still_fails_on_a_mismatch(tmp_path: Path) -> None:
    """The contract wants only the purifier's effect: the move proves nothing for it, yet an
    arrival elsewhere is still a failure of the experience's plan."""
    tm, _ = run_move(
        tmp_path,
        {"arrived_room": OTHER_ROOM},
        desired_effects=["air_purified"],
        success_criteria=[],
    )
    assert (step(tm, "go")["status"], step(tm, "go")["reason"]) == ("FAILED", "evidence_mismatch")


def test_outside_an_experience_the_trace_marks_it_contradicted(tmp_path: Path) -> None:
    """Before: the trace said only `verified: true` (there was evidence)."""
    tm, _ = run_move(tmp_path, {"arrived_room": OTHER_ROOM}, experience=False)
    assert step(tm, "go")["status"] == "COMPLETED"
    (row,) = evidence_rows(tm)
    assert {k: v for k, v in row.items() if k not in ("ts", "etag")} == {
        "kind": "evidence",
        "step_id": "go",
        "verified": False,
        "contradicted": ["arrived_room"],
    }, row
    assert step(tm, "air")["status"] == "DISPATCHED"  # a plain plan goes on, as before


def test_in_shadow_it_is_traced_and_nothing_changes(tmp_path: Path) -> None:
    tm, sink = run_move(tmp_path, {"arrived_room": OTHER_ROOM}, mode="shadow")
    assert step(tm, "go")["status"] == "COMPLETED"
    (row,) = evidence_rows(tm)
    assert row["mode"] == "shadow" and row["contradicted"] == ["arrived_room"], row
    assert row["verified"] is False
    assert not [r for r in sink.reports if r.body["event"]["status"] == "FAILED"]


@pytest.mark.parametrize(
    ("args", "evidence", "contradicted"),
    [
        ({"room": ROOM}, {"arrived_room": ROOM}, ()),
        ({"room": ROOM}, {"arrived_room": OTHER_ROOM}, ("arrived_room",)),
        ({"room": ROOM}, {"arrived_room": "안\u200b방"}, ()),  # a format character is not seen
        ({"room": ROOM}, {"arrived_room": 1}, ("arrived_room",)),  # a number is not a name
        ({"room": 1}, {"arrived_room": 1}, ()),
        ({"room": True}, {"arrived_room": 1}, ("arrived_room",)),  # true is not 1
        ({}, {"arrived_room": OTHER_ROOM}, ()),  # nothing commanded: nothing to contradict
        ({"room": {"name": ROOM}}, {"arrived_room": ROOM}, ("arrived_room",)),
        ({"room": ROOM}, {}, ()),  # missing is not contradicted
    ],
)
def test_the_screen_compares_with_the_command(
    args: dict[str, Any], evidence: dict[str, Any], contradicted: tuple[str, ...]
) -> None:
    move = CATALOG.get("mobility", "move_to_room")
    assert screen_evidence(move, evidence, args).contradicted == contradicted


def test_the_shipped_catalog_pairs_each_target_with_its_argument() -> None:
    pairs = {
        (cap, op, e.key): e.arg
        for cap in CATALOG.capabilities()
        for op in ("move_to_room", "start", "set_mode", "stop", "show_content", "say")
        if (operation := CATALOG.get(cap, op)) is not None
        for e in operation.evidence
    }
    assert pairs[("mobility", "move_to_room", "arrived_room")] == "room"
    assert pairs[("air_purifier", "start", "purifier_mode")] == "mode"
    assert pairs[("air_purifier", "set_mode", "purifier_mode")] == "mode"
    assert pairs[("air_purifier", "stop", "purifier_mode")] is None  # stop commands no mode


@pytest.mark.parametrize(
    "entry",
    [
        {"key": "arrived_room", "arg": 7},
        {"key": "arrived_room", "arg": ""},
        {"key": "arrived_room", "arg": "a b"},
        {"key": "arrived_room", "argument": "room"},
    ],
)
def test_a_bad_argument_name_stops_the_catalog(entry: dict[str, Any]) -> None:
    raw = {"m": {"o": {"timeout_s": 1, "ack_timeout_s": 1, "terminal_evidence": [entry]}}}
    with pytest.raises(CatalogError, match="terminal_evidence"):
        parse_catalog(copy.deepcopy(raw), "catalog.json")


def test_an_effect_whose_constraint_its_evidence_values_contradict_stops_the_start() -> None:
    """`set_mode {mode: quiet}` proved only by `purifier_mode = auto`: agreeing evidence could
    never prove it, so the effect catalog is refused where it says so."""
    wrong = {
        "quiet_environment": {
            "providers": [
                {
                    "capability_id": "air_purifier",
                    "operation_id": "set_mode",
                    "args": {"mode": "quiet"},
                    "evidence": {"key": "purifier_mode", "values": ["auto"]},
                }
            ]
        }
    }
    with pytest.raises(EffectsError, match=r"quiet_environment\.providers\.0.*args\.mode 'quiet'"):
        parse_effects(wrong, "effects.json", CATALOG)
    right = copy.deepcopy(wrong)
    right["quiet_environment"]["providers"][0]["evidence"]["values"] = ["quiet"]
    assert parse_effects(right, "effects.json", CATALOG).known("quiet_environment")
    assert len(load_effects(CATALOG)) == 9  # the shipped one holds
