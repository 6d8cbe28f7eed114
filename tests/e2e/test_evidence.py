"""Terminal evidence through the real process (SPEC §2.2, §4.5, §5.5): the operation's allowlist
decides what of a callback's evidence is stored, evented, traced and reported; ended workflows go
with `forget --all`, leaving no byte of them in the state DB or its WAL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2a_common.sqlite import open_state_db
from edge.store.schema import MIGRATIONS
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.test_privacy import residue
from tests.e2e.traces import trace_details

EVENTS, REPORTS = f"{ROOT}/workflow/event", "/v1/a2a/workflow/events"
VITAL = "wf-vital:step_vital"
UTTERANCE = "혈압 좀 재줘 요즘 어지러워"
READINGS = {"measurement": "succeeded", "systolic": 142, "diastolic": 95}
WORDS = ["systolic", "diastolic", "measurement"]


def vital_catalog(tmp_path: Path) -> str:
    """The shipped catalog, with the vital app's consent lifted (consent is not what this test
    is about; the allowlist of `vital_app.start_session` is the shipped one)."""
    shipped = Path(__file__).parents[2] / "taskmanager" / "catalog.json"
    catalog = json.loads(shipped.read_text(encoding="utf-8"))
    catalog["vital_app"]["start_session"]["requires_consent"] = False
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(catalog, ensure_ascii=False), encoding="utf-8")
    return str(path)


def callback(probe: MqttProbe, seq: int, status: str, evidence: Any = None) -> None:
    body = {"task_id": VITAL, "seq": seq, "status": status, "evidence": evidence}
    probe.publish(f"{ROOT}/task/callback", body)


def in_state(tmp_path: Path, needles: list[bytes]) -> list[str]:
    """Which needles are in some byte of the state DB or its WAL."""
    files = [p.read_bytes() for p in (tmp_path / "state").glob("state.db*")]
    return [n.decode() for n in needles if any(n in data for data in files)]


def leaks(text: str) -> list[str]:
    return [w for w in WORDS if w in text]


def test_vital_readings_are_never_stored_evented_or_reported(
    tmp_path: Path,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    """Before: the readings were in the trace, the workflow doc and the cloud's workflow-events
    body, and `forget --all` left "systolic" in state.db."""
    runtime_factory(taskmanager={"catalog_file": vital_catalog(tmp_path)})
    step = {"step_id": "step_vital", "capability_id": "vital_app", "operation_id": "start_session"}
    cloud.script_turn(
        route_family="ODL",
        assistant_text="혈압 측정 앱을 열게요.",
        device_workflow_requests=[{"workflow_id": "wf-vital", "steps": [step], "note": UTTERANCE}],
    )  # the planner echoes the user in an extra field
    assert probe.turn("t-vital", UTTERANCE)["workflow_ids"] == ["wf-vital"]
    probe.wait_for(f"{ROOT}/task/command/vital_app", lambda b: b.get("task_id") == VITAL)
    callback(probe, 1, "RUNNING")
    callback(probe, 2, "COMPLETED", READINGS)
    done = workflow_event(probe, "wf-vital", "WORKFLOW_COMPLETED")
    assert done["workflow_status"] == "completed"  # the transition is not lost for extra keys
    bodies = eventually(
        lambda: (
            [
                r["body"]
                for r in cloud.requests(REPORTS)
                if r["body"]["event"]["status"] == "WORKFLOW_COMPLETED"
            ]
            and [r["body"] for r in cloud.requests(REPORTS)]
        )
    )
    completed = next(b for b in bodies if b["event"]["status"] == "COMPLETED")
    assert "evidence" not in completed["event"], completed  # nothing of it was allowed
    assert not leaks(json.dumps(bodies)), bodies
    events = [e for e in probe.messages(EVENTS) if e["workflow_id"] == "wf-vital"]
    assert not leaks(json.dumps(events)), events

    trace = [json.loads(d) for d in trace_details(state_rows)]
    dropped = [d for d in trace if d.get("dropped")]
    assert dropped and dropped[0]["dropped"]["count"] == 3, trace  # counted, keys not named
    docs = state_rows("SELECT doc FROM workflows")
    assert not leaks(json.dumps([trace, docs], ensure_ascii=False)), trace
    rows = json.dumps([trace, docs], ensure_ascii=False)
    assert UTTERANCE not in rows and "[user words]" in rows  # the turn's ids, not its words
    log = (tmp_path / "runtime.log").read_text(encoding="utf-8")
    warned = [line for line in log.splitlines() if "not terminal evidence" in line]
    assert len(warned) == 3 and "succeeded" not in log  # keys named once each, no value

    needles = [w.encode() for w in WORDS] + [UTTERANCE.encode()]
    assert in_state(tmp_path, needles)  # the user's words are there before the forget
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-all", "scope": "all"})
    result = probe.wait_for(
        f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-all"
    )
    assert result["removed"]["workflows"] == 1
    assert state_rows("SELECT count(*) FROM workflows") == [(0,)]
    assert state_rows("SELECT count(*) FROM workflow_trace") == [(0,)]
    eventually(lambda: not in_state(tmp_path, needles), 10)
    assert not residue(tmp_path, [UTTERANCE.encode()])  # nor in the log


def test_bad_evidence_is_dropped_and_the_status_still_applies(
    tmp_path: Path,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    """Evidence that is not an object, off-list values and over-long strings are dropped; the
    COMPLETED is applied (before: a non-object evidence refused the whole callback)."""
    runtime_factory(taskmanager={"catalog_file": vital_catalog(tmp_path)})
    step = {"step_id": "step_vital", "capability_id": "vital_app", "operation_id": "start_session"}
    probe.publish(f"{ROOT}/workflow/request", {"workflow_id": "wf-vital", "steps": [step]})
    probe.wait_for(f"{ROOT}/task/command/vital_app", lambda b: b.get("task_id") == VITAL)
    callback(probe, 1, "RUNNING", ["systolic", 142])
    callback(probe, 2, "COMPLETED", {"vital_interaction_ended": "measured_142_95"})
    workflow_event(probe, "wf-vital", "WORKFLOW_COMPLETED")
    assert not [e for e in probe.messages(f"{ROOT}/runtime/error") if "ref" in e]
    doc = json.loads(state_rows("SELECT doc FROM workflows")[0][0])
    assert doc["steps"][0]["evidence"] is None
    trace = [json.loads(d) for d in trace_details(state_rows)]
    whys = [d["dropped"]["why"] for d in trace if d.get("dropped")]
    assert whys == [{"not_an_object": 1}, {"value_not_allowed": 1}], trace
    assert "measured_142_95" not in json.dumps(trace) and "142" not in json.dumps(trace)


LEGACY_EVIDENCE = {"measurement": "succeeded", "systolic": 151, "diastolic": 99}


def seed_legacy(db_path: Path) -> None:
    """What an older runtime left: an ended vital workflow whose doc, trace and dead-lettered
    report hold a reading."""
    db = open_state_db(db_path, MIGRATIONS)
    step = {"step_id": "s", "status": "COMPLETED", "evidence": LEGACY_EVIDENCE}
    doc = json.dumps({"workflow_id": "wf-old", "status": "completed", "steps": [step]})
    report = json.dumps({"workflow_id": "wf-old", "event": {"evidence": LEGACY_EVIDENCE}})
    at = "2026-11-30T00:00:00.000Z"
    with db.atomic():
        db.execute(
            "INSERT INTO workflows (workflow_id, status, etag, source, doc, created_at,"
            " updated_at) VALUES ('wf-old', 'completed', 3, 'planner', ?, ?, ?)",
            [doc, at, at],
        )
        db.execute(
            "INSERT INTO workflow_trace (workflow_id, ts, kind, detail)"
            " VALUES ('wf-old', ?, 'event', ?)",
            [at, json.dumps({"evidence": LEGACY_EVIDENCE})],
        )
        db.execute(
            "INSERT INTO sync_dead (write_id, kind, payload, created_at, attempts, reason,"
            " dead_at) VALUES ('w-old', 'task_terminal', ?, ?, 3, 'http_400', ?)",
            [report, at, at],
        )
    db.close()


def test_forget_all_takes_old_workflows_and_traces_and_lets_a_running_one_run(
    tmp_path: Path,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    probe: MqttProbe,
) -> None:
    """Before: `forget --all` left every workflow, trace row and report where it was."""
    seed_legacy(tmp_path / "state" / "state.db")
    runtime_factory(taskmanager={"catalog_file": vital_catalog(tmp_path)})
    step = {"step_id": "step_vital", "capability_id": "vital_app", "operation_id": "start_session"}
    probe.publish(f"{ROOT}/workflow/request", {"workflow_id": "wf-vital", "steps": [step]})
    probe.wait_for(f"{ROOT}/task/command/vital_app", lambda b: b.get("task_id") == VITAL)
    callback(probe, 1, "RUNNING")
    workflow_event(probe, "wf-vital", "RUNNING")
    needles = [b"systolic", b"diastolic", b"measurement"]
    assert in_state(tmp_path, needles)
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-old", "scope": "all"})
    result = probe.wait_for(
        f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-old"
    )
    assert result["removed"]["workflows"] == 1
    assert state_rows("SELECT workflow_id, status FROM workflows") == [("wf-vital", "running")]
    assert state_rows("SELECT count(*) FROM workflow_trace") == [(0,)]
    assert state_rows("SELECT count(*) FROM sync_dead") == [(0,)]
    eventually(lambda: not in_state(tmp_path, needles), 10)
    callback(probe, 2, "COMPLETED", {"vital_interaction_ended": "completed"})
    workflow_event(probe, "wf-vital", "WORKFLOW_COMPLETED")  # the forget did not stop it
    doc = json.loads(state_rows("SELECT doc FROM workflows")[0][0])
    assert doc["steps"][0]["evidence"] == {"vital_interaction_ended": "completed"}


MOVE = [
    {"step_id": "step_go", "capability_id": "mobility", "operation_id": "move_to_room",
     "args": {"room": "안방"}},
    {"step_id": "step_air", "capability_id": "air_purifier", "operation_id": "start",
     "args": {"mode": "auto"}, "depends_on": ["step_go"]},
]  # fmt: skip
ARRIVE_CONTRACT = {
    "contract_version": "a2a-experience-policy-v1",
    "experience_id": "exp-arrive",
    "goal_summary": "",
    "desired_effects": ["arrived_in_room", "air_purified"],
    "success_criteria": ["arrived_in_room"],
    "plan_binding": {"plan_id": "room_clean", "step_ids": ["step_go", "step_air"], "step_count": 2},
}


def move_to(probe: MqttProbe, workflow_id: str, experience: Any) -> str:
    body = {"workflow_id": workflow_id, "plan_id": "room_clean", "steps": MOVE}
    probe.publish(f"{ROOT}/workflow/request", {**body, "experience": experience})
    task_id = f"{workflow_id}:step_go"
    probe.wait_for(f"{ROOT}/task/command/mobility", lambda b: b.get("task_id") == task_id)
    return task_id


def arrive(probe: MqttProbe, task_id: str, room: str) -> None:
    for seq, status, evidence in ((1, "RUNNING", None), (2, "COMPLETED", {"arrived_room": room})):
        body = {"task_id": task_id, "seq": seq, "status": status, "evidence": evidence}
        probe.publish(f"{ROOT}/task/callback", body)


def purify(probe: MqttProbe, workflow_id: str) -> None:
    """The purifier step started after the move, run to its end in the commanded mode."""
    task_id = f"{workflow_id}:step_air"
    probe.wait_for(f"{ROOT}/task/command/air_purifier", lambda b: b.get("task_id") == task_id)
    for seq, status, evidence in (
        (1, "RUNNING", None),
        (2, "COMPLETED", {"purifier_mode": "auto"}),
    ):
        body = {"task_id": task_id, "seq": seq, "status": status, "evidence": evidence}
        probe.publish(f"{ROOT}/task/callback", body)
    workflow_event(probe, workflow_id, "WORKFLOW_COMPLETED")


def move_evidence(state_rows: StateRows, workflow_id: str) -> list[Any]:
    details = [json.loads(d) for d in trace_details(state_rows, workflow_id, "evidence")]
    return [d for d in details if d["step_id"] == "step_go"]  # the move's


def test_arriving_in_another_room_than_the_commanded_one_proves_nothing(
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    """Before: the move to 안방 that answered `arrived_room: 거실` completed with
    `arrived_in_room` met, the purifier was started in the wrong room, and outside an
    experience the trace said `verified: true`."""
    runtime_factory()
    arrive(probe, move_to(probe, "wf-wrong", ARRIVE_CONTRACT), "거실")
    failed = workflow_event(probe, "wf-wrong", "FAILED")
    assert failed["step_id"] == "step_go" and failed["reason"] == "evidence_mismatch", failed
    asked = eventually(
        lambda: [
            r["body"]
            for r in cloud.requests(REPORTS)
            if r["body"]["workflow_id"] == "wf-wrong" and r["body"]["event"]["status"] == "FAILED"
        ]
    )[0]
    assert asked["event"]["reason"] == "evidence_mismatch" and asked["decision_requested"]
    ended = workflow_event(probe, "wf-wrong", "WORKFLOW_FAILED")  # the sim planner lets it fail
    assert ended["reason"] == "evidence_mismatch", ended
    commands = probe.messages(f"{ROOT}/task/command/air_purifier")
    assert not [c for c in commands if c["task_id"].startswith("wf-wrong:")]  # not in 거실
    (row,) = move_evidence(state_rows, "wf-wrong")
    assert row["verified"] is False and row["contradicted"] == ["arrived_room"], row

    arrive(probe, move_to(probe, "wf-plain", None), "거실")  # no experience: it completes
    purify(probe, "wf-plain")
    (row,) = move_evidence(state_rows, "wf-plain")
    assert row == {"step_id": "step_go", "verified": False, "contradicted": ["arrived_room"]}, row

    arrive(probe, move_to(probe, "wf-right", ARRIVE_CONTRACT), "안방")  # the commanded room
    purify(probe, "wf-right")
    (row,) = move_evidence(state_rows, "wf-right")
    assert row["verified"] is True and "contradicted" not in row, row
