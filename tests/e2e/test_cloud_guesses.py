"""Two answers of a planner that were taken without a word (issue 35, "a cloud team had to
guess"), through the real process: a sync version moved backwards was ignored silently while a
malformed one was logged — both are now refused the same way (a WARNING without user words, kept
for `sync status`); a turn answer without `memory_update` is taken, with a WARNING and a count in
`a2a_turns_without_memory_update_total` (docs/contract.md §3.1, §3.2)."""

from __future__ import annotations

from typing import Any

from edge.config.settings import load_settings
from edge.views import state as views
from sim.broker import free_port
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, StateRows, eventually
from tests.edge.test_metrics_runtime import scrape
from tests.reliability.test_cloud_fields import update

WORDS = "비밀스러운 말"  # the user's words: in no log line at WARNING or below


def warnings(log: str, needle: str) -> list[str]:
    return [line for line in log.splitlines() if needle in line and "WARNING" in line]


def test_a_version_moved_backwards_is_refused_as_a_malformed_one_is(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime = runtime_factory()
    cloud.script_turn(memory_update=update(sync={"cursor": "cur-5", "version": "v5"}))
    assert probe.turn("t-1", WORDS)["status"] == "ok"
    cloud.script_turn(memory_update=update(sync={"cursor": "cur-2", "version": "v2"}))
    assert probe.turn("t-2", WORDS)["status"] == "ok"
    cloud.script_turn(memory_update=update(sync={"cursor": "cur-x", "version": "weird"}))
    assert probe.turn("t-3", WORDS)["status"] == "ok"
    log = eventually(lambda: (text := runtime.log()) and "weird" in text and text)
    backwards = warnings(log, "sync position refused: version v2 is behind ours (v5)")
    malformed = warnings(log, "sync position refused: version 'weird' is not of the form vN")
    assert backwards and malformed, log[-3000:]  # said alike (the sim's sync may say v2 too)
    assert state_rows("SELECT cursor, version FROM sync_position") == [("cur-5", "v5")]
    assert WORDS not in log
    refusal = views.sync_status(load_settings(runtime.config, environ={}))["last_sync_refusal"]
    assert "weird" in refusal["reason"], refusal


def test_a_turn_answer_without_memory_update_is_taken_and_said(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    port = free_port()
    runtime = runtime_factory(metrics={"enabled": True, "port": port})
    cloud.script_turn(memory_update=None)
    answer: dict[str, Any] = probe.turn("t-1", WORDS)
    assert answer["status"] == "ok" and answer["assistant_text"], answer
    # taken: the pair keeps the planner's reply and route
    rows = state_rows("SELECT assistant_text, route_family FROM pairs WHERE turn_id = 't-1'")
    assert rows == [(answer["assistant_text"], answer["route_family"])]
    log = eventually(lambda: warnings(runtime.log(), "has no memory_update") and runtime.log())
    assert len(warnings(log, "turn t-1: the planner's answer has no memory_update")) == 1
    assert WORDS not in log
    _types, values = scrape(port)
    assert values["a2a_turns_without_memory_update_total"] == 1
    probe.turn("t-2", "안녕")  # the sim's own answer carries one: not counted
    _types, values = scrape(port)
    assert values["a2a_turns_without_memory_update_total"] == 1
