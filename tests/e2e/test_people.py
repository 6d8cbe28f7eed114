"""Issue 34 through the real process (MQTT, the sim cloud's own planner, the SQLite file) over
simulated days (A2A_CLOCK_OFFSET_FILE): two people of the household and a guest (SPEC §5.7).

엄마 (A) asks for 안방, 아들 (B) for 거실, a guest says hello, an unsure voice (A below the
confidence) asks for a song. Each person's words carry their own ASCII marker, so a byte of
one person's memory is found wherever it goes: in every turn the planner got, in every file
under the state dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, state_dir
from tests.e2e.test_changes_mind import Days
from tests.e2e.test_consent import consent
from tests.e2e.test_forget_copies import holding
from tests.e2e.test_memory_cli import cli

A, B = "mom-7", "son-3"
MARK_A, MARK_B, MARK_U = "QxA7mark", "QxB7mark", "QxU7mark"
MARK_AH = "QxH7pill"  # A's health words
FORGET_OUT = f"{ROOT}/memory/forget/result"
CLI = (sys.executable, "-m", "edge")


def spoken(who: str | None, confidence: float = 0.95) -> dict[str, Any]:
    return {} if who is None else {"speaker": {"id": who, "confidence": confidence}}


def turns(cloud: SimCloud) -> list[dict[str, Any]]:
    return [r["body"] for r in cloud.requests("/v1/a2a/turn")]


def whose(body: dict[str, Any]) -> str:
    return str(body["voice_context"]["speaker_id"])


def preferred(body: dict[str, Any]) -> list[Any]:
    items = body["voice_context"]["memory_snapshot"]["long_term"]["profile_items"]
    return [i["value"] for i in items if i["key"] == "preferred_room"]


def person_rows(state_rows: StateRows, person: str) -> list[Any]:
    rows: list[Any] = []
    for table in ("pairs", "sessions", "daily_summaries", "profile_items", "profile_evidence"):
        rows += state_rows(f"SELECT * FROM {table} WHERE person_id = ? ORDER BY 1", [person])
    return rows


def test_two_people_and_a_guest_never_share_memory(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    days = Days(tmp_path / "clock-offset")
    runtime = runtime_factory(env={"A2A_CLOCK_OFFSET_FILE": str(days.offset)})
    config = str(runtime.config)
    # a speaker id with a wildcard is refused with its ref, the turn answered, nothing kept
    bad = probe.turn("t-bad", f"안녕 {MARK_A}", speaker={"id": "mom/#", "confidence": 0.9})
    assert (bad["status"], bad["error"]) == ("rejected", "invalid_field"), bad
    error = probe.wait_for(f"{ROOT}/runtime/error", lambda e: e.get("ref") == {"turn_id": "t-bad"})
    assert error["detail"].startswith("speaker.id"), error
    for day in range(3):  # days 0-2: each their own room, a guest, an unsure voice
        probe.turn(f"a{day}", f"안방 청정해줘 {MARK_A}", **spoken(A))
        probe.turn(f"b{day}", f"거실 청정해줘 {MARK_B}", **spoken(B))
        probe.turn(f"g{day}", "안녕하세요")
        probe.turn(f"u{day}", f"노래 틀어줘 {MARK_U}", **spoken(A, 0.5))
        days.next()
    b_turns = [b for b in turns(cloud) if b["recognized_text"].startswith("거실")]
    assert [MARK_A in json.dumps(b) for b in b_turns] == [False] * 3  # never A's words to B
    # three mentions on three days each: A's 안방 and B's 거실 are suggestable, each their own
    assert state_rows("SELECT count(*) FROM pairs WHERE turn_id = 't-bad'") == [(0,)]
    status = "SELECT status FROM profile_items WHERE person_id = ? AND key = 'preferred_room'"
    eventually(lambda: state_rows(status, [A]) == [("suggestable",)])
    eventually(lambda: state_rows(status, [B]) == [("suggestable",)])
    assert state_rows(status, [A + "x"]) == []
    synced = cloud.synced
    eventually(
        lambda: any(
            w["kind"] == "profile_candidate"
            and w["payload"].get("person_id") == A
            and w["payload"].get("status") == "suggestable"
            for w in synced()
        )
    )
    # day 3: A accepts the suggestion the planner made for A: confirmed for A only
    probe.turn("a-yes", f"응 좋아 {MARK_A}", **spoken(A))
    eventually(lambda: state_rows(status, [A]) == [("confirmed",)])
    assert state_rows(status, [B]) == [("suggestable",)]
    assert state_rows(status, ["household"]) == []
    probe.turn("a-next", "어느 방이 좋을까", **spoken(A))
    probe.turn("b-next", "어느 방이 좋을까", **spoken(B))
    probe.turn("g-next", "어느 방이 좋을까")
    by_turn = {b["voice_context"]["recognized_text"] + whose(b): b for b in turns(cloud)}
    assert preferred(by_turn["어느 방이 좋을까" + A]) == ["안방"]
    assert preferred(by_turn["어느 방이 좋을까" + B]) == []
    assert preferred(by_turn["어느 방이 좋을까household"]) == []
    # A's health words: kept on the device, and in A's snapshot only, under A's grant only
    probe.turn("a-pill", f"아침에 혈압약 먹었어 {MARK_AH}", **spoken(A))
    grant = {"request_id": "c-b", "action": "grant", "scope": "category:health", "person": B}
    assert consent(probe, "c-b", grant)["ok"] is True
    household_grant = {"request_id": "c-h", "action": "grant", "scope": "category:health"}
    assert consent(probe, "c-h", household_grant)["ok"] is True
    probe.turn("a-1", "안녕", **spoken(A))
    probe.turn("b-1", "안녕", **spoken(B))
    probe.turn("g-1", "안녕")
    granted = subprocess.run(  # on the service's clock, as the operator's shell would be
        [*CLI, "consent", "grant", "category:health", "--person", A, "--json", "--config", config],
        env=os.environ | {"A2A_CLOCK_OFFSET_FILE": str(days.offset)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert {"scope": "category:health", "person": A} in [
        {k: g.get(k) for k in ("scope", "person")} for g in json.loads(granted)["result"]["grants"]
    ], granted
    probe.turn("a-2", "안녕?", **spoken(A))
    probe.turn("b-2", "안녕?", **spoken(B))
    probe.turn("g-2", "안녕?")
    seen = turns(cloud)
    with_pill = [whose(b) + ":" + b["recognized_text"] for b in seen if MARK_AH in json.dumps(b)]
    assert with_pill == [f"{A}:{'아침에 혈압약 먹었어 ' + MARK_AH}", f"{A}:안녕?"], with_pill
    assert not any(MARK_AH in json.dumps(w) for w in synced())  # health: never synced
    # no turn of B or of the guest ever carried a byte of A's memory, nor A's of B's
    for body in seen:
        text = json.dumps(body, ensure_ascii=False)
        if whose(body) != A:
            assert MARK_A not in text and MARK_AH not in text, whose(body)
        if whose(body) != B:
            assert MARK_B not in text, whose(body)
    assert any(MARK_U in json.dumps(b) for b in seen if whose(b) == "household")
    # sync writes say whose
    pairs = [w["payload"] for w in synced() if w["kind"] == "short_term_pair"]
    assert {p["person_id"] for p in pairs if MARK_A in p["user_text"]} == {A}
    assert {p["person_id"] for p in pairs if MARK_U in p["user_text"]} == {"household"}

    # the CLI shows one person's memory (SPEC 5.7), read-only while the service runs
    def shown(*args: str) -> Any:
        return json.loads(cli(*args, "--json", "--config", config))

    a_pairs = shown("memory", "pairs", "--person", A)
    assert {p["person_id"] for p in a_pairs} == {A} and len(a_pairs) == 8, a_pairs
    a_show = shown("memory", "show", "--person", A)
    assert [(i["key"], i["value"], i["state"]) for i in a_show["profile_items"]] == [
        ("preferred_room", "안방", "confirmed")
    ]
    assert a_show["tiers"]["pairs"] == 8 and a_show["person"] == A
    b_snap = shown("memory", "snapshot", "--person", B, "--for", "안방 청정해줘")["snapshot"]
    assert b_snap["short_term"]["recent_pairs"] and MARK_A not in json.dumps(b_snap)
    assert MARK_AH in json.dumps(shown("memory", "snapshot", "--person", A)["snapshot"])
    people = shown("status")["people"]
    assert people[A]["pairs"] == 8 and people[B]["pairs"] == 6, people
    assert people["household"]["pairs"] == 9, people
    # forgetting A: everything of A, one tombstone, B whole, no byte of A's markers anywhere
    b_before = person_rows(state_rows, B)
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-a", "scope": "person", "id": A})
    result = probe.wait_for(FORGET_OUT, lambda body: body.get("request_id") == "f-a")
    removed = result["removed"]
    assert removed["pairs"] == 3 * 1 + 1 + 1 + 1 + 1 + 1, removed  # a0-2, yes, next, pill, 1, 2
    assert removed["profile_items"] >= 1 and removed["sessions"] >= 4, removed
    assert person_rows(state_rows, A) == []
    assert person_rows(state_rows, B) == b_before
    eventually(
        lambda: (
            [
                w["payload"]["id"]
                for w in synced()
                if w["kind"] == "memory_deletion" and w["payload"]["scope"] == "person"
            ]
            == [A]
        )
    )
    state = state_dir(tmp_path)
    for needle in (MARK_A, MARK_AH):
        found = [
            str(p.relative_to(state))
            for p in sorted(state.rglob("*"))
            if p.is_file() and needle.encode() in p.read_bytes()
        ]
        assert found == [], (needle, found)
    assert holding(state) == []  # nor any marker of the shared forget test
    assert state_rows("SELECT count(*) FROM pairs WHERE user_text LIKE ?", [f"%{MARK_B}%"]) == [
        (3,)
    ]
