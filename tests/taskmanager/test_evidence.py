"""The evidence allowlist (SPEC §4.5): the catalog's `terminal_evidence`, the screen every
callback's evidence passes, what the trace and the log say of what it dropped, and forget --all
of the TaskManager's tables."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import ManualClock
from taskmanager.catalog import load_catalog, parse_catalog
from taskmanager.core import Callback
from taskmanager.errors import CatalogError
from taskmanager.evidence import Dropped, screen_evidence, screen_reason
from taskmanager.redact import without_words
from taskmanager.service import TurnRef
from tests.taskmanager.helpers import MOVE_PURIFY, T0
from tests.taskmanager.test_service import manager

CATALOG = load_catalog()
VITAL = CATALOG.get("vital_app", "start_session")
MOVE = CATALOG.get("mobility", "move_to_room")


def op(**evidence: Any) -> dict[str, Any]:
    return {"m": {"o": {"timeout_s": 1, "ack_timeout_s": 1, **evidence}}}


def test_the_shipped_allowlists() -> None:
    assert VITAL is not None and VITAL.terminal_evidence == ("vital_interaction_ended",)
    entry = VITAL.evidence_key("vital_interaction_ended")
    assert entry is not None and entry.values == ("completed", "cancelled")
    assert MOVE is not None and MOVE.terminal_evidence == ("arrived_room",)
    assert MOVE.evidence_key("arrived_room").values is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("evidence", "says"),
    [
        ("arrived_room", "valid list"),
        ([1], "a key is a string"),
        (["a b"], "a key is a string"),
        (["x" * 65], "a key is a string"),
        (["a", "a"], "unique"),
        ([{"key": "a", "values": []}], "non-empty list of scalars"),
        ([{"key": "a", "values": [[1]]}], "non-empty list of scalars"),
        ([{"key": "a", "values": [math.inf]}], "non-empty list of scalars"),
        ([{"key": "a", "vals": ["x"]}], "`key` and optional `values` and `arg` only"),
        ([{"values": ["x"]}], "`key` and optional `values` and `arg` only"),
    ],
)
def test_a_bad_allowlist_stops_the_start(evidence: Any, says: str) -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog(op(terminal_evidence=evidence), "custom.json")
    assert "custom.json:m.o.terminal_evidence" in str(info.value) and says in str(info.value)


def test_restricted_values_compare_as_json_values() -> None:
    catalog = parse_catalog(
        op(
            terminal_evidence=[
                "free",
                {"key": "flag", "values": [True]},
                {"key": "n", "values": [1]},
            ]
        ),
        "c.json",
    )
    spec = catalog.get("m", "o")
    kept = screen_evidence(spec, {"flag": True, "n": 1, "free": "x"})
    assert kept.kept == {"flag": True, "n": 1, "free": "x"} and not kept.dropped
    odd = screen_evidence(spec, {"flag": 1, "n": True})  # 1 is not true, true is not 1
    assert odd.kept is None
    assert [d.why for d in odd.dropped] == ["value_not_allowed", "value_not_allowed"]


def test_the_screen() -> None:
    assert screen_evidence(VITAL, None).kept is None
    assert screen_evidence(VITAL, None).dropped == ()
    readings = screen_evidence(VITAL, {"measurement": "succeeded", "systolic": 142})
    assert readings.kept is None
    assert readings.dropped == (
        Dropped("measurement", "not_allowed"),
        Dropped("systolic", "not_allowed"),
    )
    ended = screen_evidence(VITAL, {"vital_interaction_ended": "cancelled", "diastolic": 95})
    assert ended.kept == {"vital_interaction_ended": "cancelled"}
    wrong = screen_evidence(VITAL, {"vital_interaction_ended": "measured_142"})
    assert wrong.dropped == (Dropped("vital_interaction_ended", "value_not_allowed", True),)
    for raw, why in [
        ({"arrived_room": "x" * 257}, "too_long"),
        ({"arrived_room": math.nan}, "not_finite"),
        ({"arrived_room": math.inf}, "not_finite"),
        ({"arrived_room": None}, "not_scalar"),
        ({"arrived_room": {"room": "안방"}}, "not_scalar"),
        ({"arrived_room": ["안방"]}, "not_scalar"),
        ("안방", "not_an_object"),
        ([1, 2], "not_an_object"),
        (7, "not_an_object"),
        ({"cancelled_by_pui": True}, "not_allowed"),  # runtime-made: an agent cannot forge it
    ]:
        screened = screen_evidence(MOVE, raw)
        assert screened.kept is None and [d.why for d in screened.dropped] == [why], raw
    assert screen_evidence(MOVE, {"arrived_room": "안" * 256}).kept == {"arrived_room": "안" * 256}
    assert screen_evidence(MOVE, {"arrived_room": 2.5}).kept == {"arrived_room": 2.5}
    assert screen_evidence(None, {"arrived_room": "안방"}).kept is None  # no operation, no list


def test_a_callback_keeps_its_status_the_trace_counts_and_the_log_names_keys_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tm, _outbox = manager(tmp_path / "s.db", ManualClock(T0))
    for n in (1, 2):
        tm.submit({**MOVE_PURIFY, "workflow_id": f"wf-{n}"}, source="planner")
    caplog.set_level(logging.WARNING, logger="taskmanager.evidence")
    extra = {"arrived_room": "안방", "odometry_m": 6.3, "note": "x" * 300}
    tm.callback(Callback("wf-1:step_move", 1, "COMPLETED", evidence=extra))
    tm.callback(Callback("wf-2:step_move", 1, "COMPLETED", evidence={**extra, "odometry_m": 1}))
    for n in (1, 2):
        doc = tm.store.get(f"wf-{n}")
        assert doc is not None and doc["steps"][0]["status"] == "COMPLETED"
        assert doc["steps"][0]["evidence"] == {"arrived_room": "안방"}
    [row] = [t for t in tm.store.timeline("wf-1") if t["kind"] == "evidence_dropped"]
    assert row["dropped"] == {"count": 2, "why": {"not_allowed": 2}, "keys": []}
    assert row["step_id"] == "step_move" and row["seq"] == 1
    assert "odometry_m" not in json.dumps(tm.store.timeline("wf-1"))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2  # once per (capability, operation, key), not per callback
    assert any("'odometry_m'" in w and "mobility.move_to_room" in w for w in warned)
    assert not any("6.3" in w or "xxx" in w for w in warned)


def test_forget_all_of_the_task_manager(tmp_path: Path) -> None:
    tm, _outbox = manager(tmp_path / "s.db", ManualClock(T0))
    tm.submit({**MOVE_PURIFY, "workflow_id": "wf-done"}, source="planner")
    tm.callback(Callback("wf-done:step_move", 1, "FAILED", reason="path_blocked"))
    tm.cancel("wf-done", "user")
    tm.submit({**MOVE_PURIFY, "workflow_id": "wf-run"}, source="planner")
    asked: list[list[str]] = []

    def drop_reports(ids: list[str]) -> int:
        asked.append(ids)
        return 4

    counts = tm.forget_all(drop_reports)
    assert asked == [["wf-done"]]
    assert counts["workflows"] == 1 and counts["reports"] == 4 and counts["workflow_traces"] > 3
    assert tm.store.get("wf-done") is None and tm.store.timeline("wf-run") == []
    assert list(tm.board.workflows) == ["wf-run"]  # it keeps running
    tm.callback(Callback("wf-run:step_move", 1, "COMPLETED", evidence={"arrived_room": "안방"}))
    doc = tm.store.get("wf-run")
    assert doc is not None and doc["steps"][0]["status"] == "COMPLETED"


def test_a_flood_of_made_up_keys_is_a_few_log_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tm, _outbox = manager(tmp_path / "s.db", ManualClock(T0))
    tm.submit(MOVE_PURIFY, source="planner")
    caplog.set_level(logging.WARNING, logger="taskmanager.evidence")
    flood = {f"k{n}_{'x' * 500}": n for n in range(300)}
    tm.callback(Callback("wf-1:step_move", 1, "COMPLETED", evidence=flood))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 9 and "292 more evidence keys dropped" in lines[-1]
    assert max(len(line) for line in lines) < 300  # keys cut to 64 characters
    doc = tm.store.get("wf-1")
    assert doc is not None and doc["steps"][0]["status"] == "COMPLETED"
    [row] = [t for t in tm.store.timeline("wf-1") if t["kind"] == "evidence_dropped"]
    assert row["dropped"]["count"] == 300 and len(json.dumps(row)) < 200


def test_the_trace_keeps_the_request_without_the_users_words(tmp_path: Path) -> None:
    tm, _outbox = manager(tmp_path / "s.db", ManualClock(T0))
    words = "혈압 좀 재줘 요즘 어지러워"
    turn = TurnRef("t-1", "pair-1", "session-1", words)
    echo = {**MOVE_PURIFY, "note": f"사용자: {words}", "deep": [[{"x": words.upper()}]]}
    assert tm.submit(echo, source="planner", turn=turn).accepted == ["wf-1"]
    rejected = {"workflow_id": "wf-bad", "steps": [], "echo": words}
    assert tm.submit(rejected, source="planner", turn=turn).rejected
    stored = json.dumps(
        [tm.store.timeline("wf-1"), tm.store.timeline("wf-bad"), tm.store.get("wf-bad")],
        ensure_ascii=False,
    )
    assert words not in stored and "어지러워" not in stored
    [request] = [t for t in tm.store.timeline("wf-1") if t["kind"] == "request"]
    assert request["request"]["note"] == "[user words]" and request["turn_id"] == "t-1"
    assert request["request"]["steps"] == MOVE_PURIFY["steps"]  # the rest as it came


def test_redaction_is_bounded() -> None:
    deep: Any = "혈압 재줘"
    for _ in range(5000):  # deeper than Python's recursion limit
        deep = [deep]
    assert without_words(deep, "혈압 재줘") is not None
    assert without_words({"a": "x"}, " ") == {"a": "x"}  # nothing to look for


@pytest.mark.parametrize(
    ("reason", "kept"),
    [
        ("path_blocked", "path_blocked"),
        ("e.bus:timeout-3", "e.bus:timeout-3"),
        (None, None),
        ("혈압 150 VR2 measured", "agent_reason_withheld"),
        ("user said 내 전화번호는 010-9999-8888", "agent_reason_withheld"),
        ("systolic 142", "agent_reason_withheld"),  # a space: not a code
        ("x" * 65, "agent_reason_withheld"),
        ("blocked\n", "agent_reason_withheld"),
        ("", "agent_reason_withheld"),
    ],
)
def test_a_reason_is_kept_only_as_a_code(reason: str | None, kept: str | None) -> None:
    assert screen_reason(reason) == kept


def test_a_free_text_reason_reaches_no_trace_event_report_or_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tm, outbox = manager(tmp_path / "s.db", ManualClock(T0))
    for n in (1, 2):
        tm.submit({**MOVE_PURIFY, "workflow_id": f"wf-{n}"}, source="planner")
    caplog.set_level(logging.DEBUG)
    said = "user said 내 전화번호는 010-9999-8888"
    tm.callback(Callback("wf-1:step_move", 1, "FAILED", reason="혈압 150 VR2 measured"))
    tm.callback(Callback("wf-2:step_move", 1, "FAILED", reason=said))
    stored = json.dumps(
        [tm.store.get("wf-1"), tm.store.get("wf-2"), tm.store.timeline("wf-1")],
        ensure_ascii=False,
    )
    published = json.dumps(outbox.rows_under("a2a/"), ensure_ascii=False)
    logged = " ".join(r.getMessage() for r in caplog.records)
    for where in (stored, published, logged):
        assert "혈압" not in where and "150" not in where and "9999" not in where
    assert "agent_reason_withheld" in stored and "agent_reason_withheld" in published
    warned = [r for r in caplog.records if "not a code" in r.getMessage()]
    assert len(warned) == 1  # once per (capability, operation)
    doc = tm.store.get("wf-1")
    assert doc is not None and doc["steps"][0]["status"] == "FAILED"
