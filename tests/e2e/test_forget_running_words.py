"""Issue 30 item 6, the attacker's second find: the cloud quotes the user's words in a step's
args (`speaker.say`), and `forget --all` left them in `state.db` in the workflows still active at
the forget — and in one that ended a few seconds later, for good. SPEC §5.5 as docs/design.md
("A step's words live as long as the step") reads it: a step's args are kept only while the step
may still be sent; once it ends they are cleared in the same unit. So after the forget answers,
the only bytes of the words left under the state dir are the args of the steps not yet ended
(the robot still says them); once those end, none at all — in the DB file and its WAL.

Through the real process: a real broker, the sim cloud scripting the plan, the SQLite file's raw
bytes searched (the Korean part as UTF-8 and the ASCII part apart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, state_dir, workflow_event

KOREAN, ASCII = "수국꽃현관암호", "Vy4qSayMarker27"
QUOTED = f"현관 {KOREAN} {ASCII}"  # what the cloud has the robot say: the user's own words
UTTERANCE = f"{QUOTED} 이라고 세 번 말해줘"
NEEDLES = [KOREAN.encode(), ASCII.encode()]
WF = "wf-say"


def counts(directory: Path) -> dict[str, int]:
    """File (relative) -> how many times the marker's parts occur in its raw bytes (the fewer
    of the two: each quote holds both), only files that hold any."""
    found = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = path.read_bytes()
        n = min(data.count(needle) for needle in NEEDLES)
        if n or any(needle in data for needle in NEEDLES):
            found[str(path.relative_to(directory))] = max(n, 1)
    return found


def say(step_id: str, after: list[str]) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "capability_id": "speaker",
        "operation_id": "say",
        "args": {"text": QUOTED},
        "depends_on": after,
    }


def callback(probe: MqttProbe, step_id: str, seq: int, status: str) -> None:
    body: dict[str, Any] = {"task_id": f"{WF}:{step_id}", "seq": seq, "status": status}
    if status == "COMPLETED":
        body["evidence"] = {"spoken": True}
    probe.publish(f"{ROOT}/task/callback/speaker", body)


def steps_quoting(state_rows: StateRows) -> list[tuple[str, str]]:
    """(step_id, status) of every stored step whose args hold the words."""
    found = []
    for (doc,) in state_rows("SELECT doc FROM workflows"):
        for step in json.loads(doc)["steps"]:
            if ASCII in json.dumps(step.get("args"), ensure_ascii=False):
                found.append((step["step_id"], step["status"]))
    return sorted(found)


def step_status(state_rows: StateRows, step_id: str) -> str | None:
    rows = state_rows("SELECT doc FROM workflows WHERE workflow_id = ?", [WF])
    steps = {s["step_id"]: s["status"] for s in json.loads(rows[0][0])["steps"]} if rows else {}
    return steps.get(step_id)


def test_a_forget_leaves_only_what_unended_steps_still_say_and_nothing_once_they_end(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    runtime_factory(storage={"max_wal_mb": 64})
    state = state_dir(tmp_path)
    cloud.script_turn(
        route_family="ODL",
        assistant_text="말할게요.",
        device_workflow_requests=[
            {"workflow_id": WF, "steps": [say("s0", []), say("s1", ["s0"]), say("s2", ["s1"])]}
        ],
    )
    assert probe.turn("t-say", UTTERANCE)["workflow_ids"] == [WF]
    # s0 is said and ends; s1 is being said (RUNNING); s2 waits behind it (QUEUED)
    probe.wait_for(f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == f"{WF}:s0")
    callback(probe, "s0", 1, "COMPLETED")
    command = probe.wait_for(
        f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == f"{WF}:s1"
    )
    assert command["args"] == {"text": QUOTED}  # the robot is given the words to say
    callback(probe, "s1", 1, "RUNNING")
    eventually(lambda: step_status(state_rows, "s1") == "RUNNING", 15)
    assert step_status(state_rows, "s2") == "QUEUED"

    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-all", "scope": "all"})
    answer = probe.wait_for(
        f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-all", timeout_s=15
    )
    assert answer["removed"]["pairs"] == 1
    # what is left is exactly the args of the two steps not yet ended, once each, in the DB
    # file (the WAL truncated): the ended s0's words went with the forget
    assert steps_quoting(state_rows) == [("s1", "RUNNING"), ("s2", "QUEUED")]
    assert counts(state) == {"state.db": 2}, counts(state)

    # the robot goes on saying what it was asked to
    callback(probe, "s1", 2, "COMPLETED")
    command = probe.wait_for(
        f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == f"{WF}:s2"
    )
    assert command["args"] == {"text": QUOTED}
    callback(probe, "s2", 1, "COMPLETED")
    workflow_event(probe, WF, "WORKFLOW_COMPLETED", 15)
    assert steps_quoting(state_rows) == []
    # once the last step that needed them ended, not a byte anywhere under the state dir
    eventually(lambda: counts(state) == {}, 15)


def test_a_step_that_ends_keeps_no_args_in_its_stored_workflow(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    """With no forget at all: an ended step's args are not kept (they were needed to send it)."""
    runtime_factory()
    cloud.script_turn(
        route_family="ODL",
        assistant_text="말할게요.",
        device_workflow_requests=[{"workflow_id": WF, "steps": [say("s0", []), say("s1", [])]}],
    )
    assert probe.turn("t-say", UTTERANCE)["workflow_ids"] == [WF]
    probe.wait_for(f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == f"{WF}:s0")
    callback(probe, "s0", 1, "COMPLETED")
    eventually(lambda: step_status(state_rows, "s0") == "COMPLETED", 15)
    assert [step for step, _ in steps_quoting(state_rows)] == ["s1"]  # s1 is still to say


def test_a_forget_of_one_pair_reaches_the_workflows_quoting_it_and_no_other(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    """`forget --pair`: the workflow its turn asked for (ended) goes with its trace; one a later
    turn asked for that quotes its words (fragment match) keeps running, its trace gone, its
    running step's words kept until it ends; an unrelated workflow keeps everything."""
    runtime_factory(storage={"max_wal_mb": 64})
    state = state_dir(tmp_path)
    cloud.script_turn(
        route_family="ODL",
        assistant_text="말할게요.",
        device_workflow_requests=[{"workflow_id": "wf-done", "steps": [say("s0", [])]}],
    )
    assert probe.turn("t-say", UTTERANCE)["workflow_ids"] == ["wf-done"]
    probe.wait_for(f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == "wf-done:s0")
    probe.publish(
        f"{ROOT}/task/callback/speaker",
        {"task_id": "wf-done:s0", "seq": 1, "status": "COMPLETED", "evidence": {"spoken": True}},
    )
    workflow_event(probe, "wf-done", "WORKFLOW_COMPLETED", 15)
    show = {"capability_id": "display", "operation_id": "show_content", "args": {"content_id": "x"}}
    cloud.script_turn(
        route_family="ODL",
        assistant_text="보여줄게요.",
        device_workflow_requests=[
            {"workflow_id": "wf-other", "steps": [{"step_id": "s0", **show}]}
        ],
    )
    assert probe.turn("t-other", "거실 화면 켜줘")["workflow_ids"] == ["wf-other"]
    cloud.script_turn(  # the cloud remembers: a later turn's plan quotes the first one's words
        route_family="ODL",
        assistant_text="다시 말할게요.",
        device_workflow_requests=[{"workflow_id": WF, "steps": [say("s0", [])]}],
    )
    assert probe.turn("t-later", "아까 그거 다시 말해줘")["workflow_ids"] == [WF]
    probe.wait_for(f"{ROOT}/task/command/speaker", lambda b: b.get("task_id") == f"{WF}:s0")
    callback(probe, "s0", 1, "RUNNING")
    eventually(lambda: step_status(state_rows, "s0") == "RUNNING", 15)
    [(pair_id,)] = state_rows("SELECT pair_id FROM pairs WHERE turn_id = 't-say'")

    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-1", "scope": "pair", "id": pair_id})
    answer = probe.wait_for(
        f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-1", timeout_s=15
    )
    assert answer["removed"]["pairs"] == 1 and answer["removed"]["workflows"] == 1
    ids = [w for (w,) in state_rows("SELECT workflow_id FROM workflows ORDER BY workflow_id")]
    assert ids == ["wf-other", WF]
    traced = state_rows("SELECT DISTINCT workflow_id FROM workflow_trace ORDER BY workflow_id")
    assert traced == [("wf-other",)]
    assert steps_quoting(state_rows) == [("s0", "RUNNING")]
    assert counts(state) == {"state.db": 1}, counts(state)

    callback(probe, "s0", 2, "COMPLETED")
    workflow_event(probe, WF, "WORKFLOW_COMPLETED", 15)
    eventually(lambda: counts(state) == {}, 15)
