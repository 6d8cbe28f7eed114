"""Issue 30 item 7 through the real process (MQTT, the sim cloud, the SQLite file, the CLI) on a
simulated clock: 안방 said and sent composed (NFC) on one day, decomposed (NFD) on another and
with a zero-width space under a zero-width-spaced key on a third is one candidate, suggestable
after the three days; an NFD repeat of an NFC turn gets the stored answer; `memory forget --key`
with a format character in the key forgets the key. On main: three candidates, a
`duplicate_turn_id` refusal, and the forget left a variant behind."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually
from tests.e2e.test_memory_cli import cli

DAY = 86400
NFC = "안방"
NFD = unicodedata.normalize("NFD", NFC)
ZW = "안\u200b방"
KEY = "preferred_room"


def scripted(cloud: SimCloud, key: str, value: str, said: str) -> None:
    """The next turn's answer: no workflow, one `preferred_room` candidate as spelt here."""
    cloud.script_turn(
        device_workflow_requests=[],
        memory_update={
            "write_candidates": {
                "short_term_pair": {"user_text": said, "assistant_text": "", "route_family": "DEF"},
                "profile_candidates": [
                    {"key": key, "value": value, "category": "device_pattern", "confidence": 0.8}
                ],
            },
            "device_cache_update": {"last_route": "DEF", "session_summary": f"{value} 청정"},
        },
    )


def answers(probe: MqttProbe, turn_id: str) -> list[Any]:
    return [b for b in probe.messages(f"{ROOT}/turn/response") if b.get("turn_id") == turn_id]


def test_one_room_one_key_through_the_service(
    tmp_path: Path,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    state_rows: StateRows,
) -> None:
    offset = tmp_path / "clock-offset"
    offset.write_text("0")
    runtime = runtime_factory(env={"A2A_CLOCK_OFFSET_FILE": str(offset)})
    spellings = [(KEY, NFC), (KEY, NFD), ("preferred\u200b_room", ZW)]
    for day, (key, value) in enumerate(spellings):
        offset.write_text(str(day * DAY))
        said = f"{value} 청정해줘"
        scripted(cloud, key, value, said)
        first = probe.turn(f"t-{day}", said)
        assert first["status"] != "rejected", first

    sent = [r["body"]["recognized_text"] for r in cloud.requests("/v1/a2a/turn")]
    assert sent == [f"{NFC} 청정해줘"] * 3  # the planner reads one spelling
    items = state_rows("SELECT key, value, status FROM profile_items ORDER BY key, value")
    assert items == [(KEY, json.dumps(NFC, ensure_ascii=False), "suggestable")], items
    texts = state_rows("SELECT user_text FROM pairs ORDER BY created_at")
    assert texts == [(f"{NFC} 청정해줘",)] * 3

    # the front-end retries the first turn, decomposed this time: the same answer again
    probe.publish(f"{ROOT}/turn/request", {"turn_id": "t-0", "recognized_text": f"{NFD} 청정해줘"})
    again = eventually(lambda: (a := answers(probe, "t-0"))[1:] and a, timeout_s=15)
    assert again[1] == again[0] and again[1]["status"] != "rejected", again
    assert len(cloud.requests("/v1/a2a/turn")) == 3  # nothing ran twice

    offset.write_text("0")  # the CLI stamps its deadline with its own clock (item 16's)
    done = json.loads(
        cli("memory", "forget", "--key", f"\ufeff{KEY}", "--json", "--config", str(runtime.config))
    )
    assert done["result"]["removed"]["profile_items"] == 1, done
    left = state_rows("SELECT key FROM profile_items")
    assert left == [], left
