"""Issue 33, reproduced through the real process (MQTT, the sim cloud recording every request,
the SQLite file): what people say of their health, classified by the device itself (no cloud
label), stays out of the snapshot and sync without consent and is there with it; a workflow
quoting part of the utterance leaves no fragment of it in the trace, its events or reports."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.test_privacy_tiers import last_snapshot, synced_turns, text

REPRODUCED = ["엄마가 암에 걸렸어", "정신과 다녀왔어", "나 요즘 우울해", "아침약 챙겨줘"]


def _say_all(probe: MqttProbe, cloud: SimCloud) -> tuple[str, str]:
    for n, said in enumerate(REPRODUCED):
        assert probe.turn(f"t-{n}", said)["status"] == "ok"
    probe.turn("t-next", "거실 청정해줘")
    eventually(lambda: "t-next" in synced_turns(cloud))
    bodies = text([r["body"] for r in cloud.requests("/v1/a2a/memory/sync")])
    return text(last_snapshot(cloud)), bodies


def test_health_in_everyday_words_stays_on_the_device_without_consent(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    """Before: each of the four was labelled no category, in `recent_pairs` and in a sync body."""
    runtime_factory()  # no consent for health (the default)
    snapshot, bodies = _say_all(probe, cloud)
    for said in REPRODUCED:
        assert said not in snapshot, (said, snapshot)
        assert said not in bodies, said
    assert synced_turns(cloud) == ["t-next"]
    labels = state_rows("SELECT categories FROM pairs WHERE turn_id LIKE 't-_' ORDER BY turn_id")
    assert labels == [('["health"]',)] * 4


def test_with_consent_the_same_words_are_in_the_snapshot(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(privacy={"consented_categories": ["health"]})
    snapshot, _ = _say_all(probe, cloud)
    users = [p["user"] for p in json.loads(snapshot)["short_term"]["recent_pairs"]]
    for said in REPRODUCED:
        assert said in users, (said, users)


UTTERANCE = "엄마가 암에 걸렸어 병원 가는 길 안내해줘"


def test_a_workflow_quoting_part_of_the_utterance_keeps_no_fragment(
    tmp_path: Path,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    """Before: only a string holding the whole utterance was replaced; "암에 걸렸어" quoted in a
    step's args and the workflow's note stayed in the trace."""
    runtime_factory()
    step = {
        "step_id": "s1",
        "capability_id": "display",
        "operation_id": "show_content",
        "args": {"content_id": "route", "caption": "엄마가 암에 걸렸어서"},
    }
    cloud.script_turn(
        route_family="ODL",
        assistant_text="안내할게요.",
        device_workflow_requests=[
            {"workflow_id": "wf-q", "steps": [step], "note": "user said 병원 가는 길"}
        ],
    )
    assert probe.turn("t-q", UTTERANCE)["workflow_ids"] == ["wf-q"]
    probe.wait_for(f"{ROOT}/task/command/display", lambda b: b.get("task_id") == "wf-q:s1")
    probe.publish(f"{ROOT}/task/callback", {"task_id": "wf-q:s1", "seq": 1, "status": "COMPLETED"})
    workflow_event(probe, "wf-q", "WORKFLOW_COMPLETED")
    reports = eventually(
        lambda: (
            [
                r["body"]
                for r in cloud.requests("/v1/a2a/workflow/events")
                if r["body"]["event"]["status"] == "WORKFLOW_COMPLETED"
            ]
            and [r["body"] for r in cloud.requests("/v1/a2a/workflow/events")]
        )
    )
    trace = [d for (d,) in state_rows("SELECT detail FROM workflow_trace")]
    events = [e for e in probe.messages(f"{ROOT}/workflow/event") if e["workflow_id"] == "wf-q"]
    everything = json.dumps([trace, events, reports], ensure_ascii=False)
    print(
        "TRACE",
        trace,
        "\nEVENTS",
        json.dumps(events, ensure_ascii=False)[:600],
        "\nREPORTS",
        json.dumps(reports, ensure_ascii=False)[:1500],
    )
    for fragment in ("암에 걸렸어", "병원 가는 길", "가는 길", "엄마가 암에"):
        assert fragment not in everything, (fragment, everything)
    assert "[user words]" in everything


def test_a_predicate_added_by_a_reload_hides_its_conjugations_stored_before(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    """A deployment's lexicon_file grows by a predicate (a kind the substring lexicon did not
    have): the pairs stored before, in any conjugation of it, are labelled again at the reload."""
    extra = tmp_path / "extra.json"
    extra.write_text('{"hobby": ["낚시"]}', encoding="utf-8")
    runtime = runtime_factory(privacy={"lexicon_file": str(extra)})
    probe.turn("t-1", "자고 나면 붓고 그래 MKZ")
    probe.turn("t-2", "안녕")
    assert "MKZ" in text(last_snapshot(cloud))  # not a known term yet
    extra.write_text('{"health": [{"term": "붓다", "match": "predicate"}]}', encoding="utf-8")
    assert runtime.proc is not None
    runtime.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "stored texts labelled again" in runtime.log())
    probe.turn("t-3", "안녕")
    assert "MKZ" not in text(last_snapshot(cloud))
