"""Issue 18, reproduced through the real process (MQTT, the sim cloud that records every request,
the SQLite file): a health utterance in every tier of the snapshot and in sync, `forget --key`
leaving the fact in its source pair, a cloud-confirmed sensitive item that never expired."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.memory import build_memory_update
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually
from tests.e2e.test_privacy import residue

HEALTH = "나 고혈압이 있어서 약 먹고 있어"


def memory_update(text: str, **fields: Any) -> dict[str, Any]:
    update = build_memory_update(
        recognized_text=text,
        route_family="CHAT",
        workflow_id="",
        sync={"cursor": "", "version": ""},
    )
    del update["sync"]
    update["device_cache_update"]["session_summary"] = fields.get("session_summary", "")
    update["write_candidates"]["profile_candidates"] = fields.get("candidates", [])
    return update


def last_snapshot(cloud: SimCloud) -> dict[str, Any]:
    snapshot: dict[str, Any] = cloud.requests("/v1/a2a/turn")[-1]["body"]["voice_context"][
        "memory_snapshot"
    ]
    return snapshot


def synced_turns(cloud: SimCloud) -> list[str]:
    return [w["payload"]["turn_id"] for w in cloud.synced() if w["kind"] == "short_term_pair"]


def text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_a_health_utterance_reaches_no_tier_of_the_snapshot_and_no_sync(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime_factory()  # no consent for health (the default)
    daily = {"day": "2026-06-24", "summary": "혈압약 복용을 두 번 언급"}
    cloud.script_sync({"status": 200, "updates": {"daily_summaries": [daily]}})
    probe.turn("t-hi", "안녕")
    eventually(lambda: state_rows("SELECT day FROM daily_summaries"))
    cloud.script_turn(
        memory_update=memory_update(HEALTH, session_summary="사용자는 고혈압 약을 복용 중")
    )
    assert probe.turn("t-health", HEALTH)["status"] == "ok"
    probe.turn("t-next", "거실 청정해줘")
    snapshot = last_snapshot(cloud)
    assert "혈압" not in text(snapshot), snapshot
    assert "복용" not in text(snapshot)
    assert [p["user"] for p in snapshot["short_term"]["recent_pairs"]] == ["안녕"]
    eventually(lambda: "t-next" in synced_turns(cloud))  # sent in order: t-health had its turn
    assert synced_turns(cloud) == ["t-hi", "t-next"]
    assert "혈압" not in text([r["body"] for r in cloud.requests("/v1/a2a/memory/sync")])
    assert state_rows("SELECT categories FROM pairs WHERE turn_id = 't-health'") == [
        ('["health"]',)
    ]


def test_forgetting_a_key_forgets_the_words_it_came_from(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    runtime_factory(privacy={"consented_categories": ["health"]})  # so the snapshot shows it
    condition = {"key": "condition", "value": "고혈압", "category": "health"}
    cloud.script_turn(memory_update=memory_update(HEALTH, candidates=[condition]))
    probe.turn("t-health", HEALTH)
    diabetes = {"key": "condition2", "value": "당뇨병", "category": "health"}
    cloud.script_turn(memory_update=memory_update("당뇨병도 있어", candidates=[diabetes]))
    probe.turn("t-diabetes", "당뇨병도 있어")
    probe.turn("t-hi", "안녕")
    assert "고혈압" in text(last_snapshot(cloud))  # before the forget
    pair = state_rows("SELECT pair_id FROM pairs WHERE turn_id = 't-health'")[0][0]
    probe.publish(
        f"{ROOT}/memory/forget", {"request_id": "f-k", "scope": "profile_key", "id": "condition"}
    )
    result = probe.wait_for(f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-k")
    assert result["removed"]["pairs"] == 1 and result["removed"]["profile_items"] == 1
    eventually(lambda: not residue(tmp_path, ["고혈압".encode()]), 10)
    probe.turn("t-after", "안녕")
    assert "고혈압" not in text(last_snapshot(cloud))
    tombstones = eventually(lambda: [w for w in cloud.synced() if w["kind"] == "memory_deletion"])
    assert tombstones[0]["payload"]["pair_ids"] == [pair]
    assert tombstones[0]["payload"]["profile_keys"] == ["condition"]
    # `with_sources: false` forgets the item and keeps the words
    probe.publish(
        f"{ROOT}/memory/forget",
        {"request_id": "f-k2", "scope": "profile_key", "id": "condition2", "with_sources": False},
    )
    kept = probe.wait_for(f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-k2")
    assert kept["removed"]["pairs"] == 0 and kept["removed"]["profile_items"] == 1
    assert state_rows("SELECT user_text FROM pairs WHERE turn_id = 't-diabetes'") == [
        ("당뇨병도 있어",)
    ]


def test_a_cloud_confirmed_sensitive_item_is_gone_after_31_days(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    offset = tmp_path / "clock-offset"
    offset.write_text("0")
    runtime_factory(
        env={"A2A_CLOCK_OFFSET_FILE": str(offset)},
        privacy={"consented_categories": ["home_layout"]},  # shown while it lives
        memory={"retention_every_s": 1},
    )
    door = {"key": "door_code", "value": "4321", "category": "home_layout", "status": "confirmed"}
    cloud.script_sync({"status": 200, "updates": {"profile_items": [door]}})
    probe.turn("t-hi", "안녕")
    eventually(lambda: state_rows("SELECT key FROM profile_items WHERE key = 'door_code'"))

    def items() -> list[str]:
        return [i["key"] for i in last_snapshot(cloud)["long_term"]["profile_items"]]

    # The turns name the item (door code): since fb25117 an item a turn does not name is
    # standing context, sent with at most half of the turns by the turn's ordinal and minute,
    # so a '안녕' carried it in some minutes only and the expiry's assert passed by the minute.
    probe.turn("t-2", "door code 뭐였지")
    assert items() == ["door_code"]
    expire_at = state_rows("SELECT expire_at FROM profile_items WHERE key = 'door_code'")[0][0]
    assert expire_at is not None  # the 30-day cap holds for cloud-confirmed items
    offset.write_text(str(31 * 86400))
    eventually(lambda: not state_rows("SELECT key FROM profile_items WHERE key = 'door_code'"))
    probe.turn("t-3", "door code 뭐였지")
    assert items() == []
    assert "4321" not in text(last_snapshot(cloud))


EVASIONS = [
    "ｍｙ ｂｌｏｏｄ ｐｒｅｓｓｕｒｅ MKA",
    "혈\u200b압 MKB",
    "혈 압 재줘 MKC",
    "HeAlTh Blood-Pressure MKD",
    "비번 알려줘 MKE",
]


def test_evaded_sensitive_words_and_a_full_width_label_stay_on_the_device(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    """Lexicon evasions (full-width, zero-width space, a space inside, mixed case, an everyday
    short form) and a cloud label `ｈｅａｌｔｈ` reach neither the snapshot nor sync."""
    runtime_factory()  # no consent for anything sensitive
    for n, said in enumerate(EVASIONS):
        probe.turn(f"t-e{n}", said)
    labelled = memory_update("오늘 MKF")
    labelled["write_candidates"]["short_term_pair"]["category"] = "ｈｅａｌｔｈ"
    cloud.script_turn(memory_update=labelled)
    probe.turn("t-fw", "오늘 MKF")
    probe.turn("t-next", "거실 청정해줘")
    eventually(lambda: "t-next" in synced_turns(cloud))
    snapshot = text(last_snapshot(cloud))
    bodies = text([r["body"] for r in cloud.requests("/v1/a2a/memory/sync")])
    for marker in ("MKA", "MKB", "MKC", "MKD", "MKE", "MKF"):
        assert marker not in snapshot, (marker, snapshot)
        assert marker not in bodies, marker
    assert synced_turns(cloud) == ["t-next"]
    assert state_rows("SELECT categories FROM pairs WHERE turn_id = 't-fw'") == [('["health"]',)]


def test_a_term_added_by_a_reload_hides_what_was_stored_before_it(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    """Issue: a lexicon term added with privacy.lexicon_file + SIGHUP left the pairs already
    stored unlabelled; they kept going into the snapshot."""
    extra = tmp_path / "extra.json"
    extra.write_text('{"hobby": ["낚시"]}', encoding="utf-8")
    runtime = runtime_factory(privacy={"lexicon_file": str(extra)})
    probe.turn("t-1", "통풍 때문에 힘들어 MKG")
    probe.turn("t-2", "안녕")
    assert "MKG" in text(last_snapshot(cloud))  # not a known term yet
    extra.write_text('{"health": ["통풍"]}', encoding="utf-8")
    assert runtime.proc is not None
    runtime.proc.send_signal(signal.SIGHUP)
    eventually(lambda: "stored texts labelled again" in runtime.log())
    probe.turn("t-3", "안녕")
    assert "MKG" not in text(last_snapshot(cloud))
