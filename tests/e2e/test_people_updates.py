"""The device is the truth about whose words are whose (SPEC §5.7, §3.2; issue 34 follow-up),
through the real process: Mosquitto, the sim cloud's sync answer, the state DB on disk.

Reproduced on main: a sync answer's `updates` put 엄마's words in 아들's memory (a daily summary
or a profile item naming `person_id: "son"` whose only source was 엄마's session or pair) and
in the household's (a daily summary naming no one, sourced from 엄마's session), so they
reached 아들's and a guest's snapshots."""

from __future__ import annotations

import json
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, StateRows, eventually

MOM, SON = "mom", "son"


def said(who: str | None) -> dict[str, Any]:
    return {} if who is None else {"speaker": {"id": who, "confidence": 0.95}}


def test_a_sync_update_takes_its_sources_person_and_never_another(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime = runtime_factory()
    probe.turn("m-1", "안방 청정해줘", **said(MOM))
    probe.turn("s-1", "거실 청정해줘", **said(SON))
    probe.turn("g-1", "안녕")

    def one(sql: str, person: str) -> str:
        [(found,)] = state_rows(sql, [person])
        return str(found)

    mom_session = one("SELECT session_id FROM sessions WHERE person_id = ?", MOM)
    mom_pair = one("SELECT pair_id FROM pairs WHERE person_id = ?", MOM)
    son_pair = one("SELECT pair_id FROM pairs WHERE person_id = ?", SON)
    synced = {"m-1", "s-1", "g-1"}
    eventually(
        lambda: (
            synced
            <= {w["payload"]["turn_id"] for w in cloud.synced() if w["kind"] == "short_term_pair"}
        )
    )
    updates = {
        "daily_summaries": [
            # 엄마's session, said to be 아들's: refused
            {"day": "2026-06-20", "summary": "QxM1 엄마", "source_session_ids": [mom_session],
             "person_id": SON},
            # 엄마's session, no one named: 엄마's, never the household's
            {"day": "2026-06-21", "summary": "QxM2 엄마", "source_session_ids": [mom_session]},
            # sources the device does not hold and no one named: not the household's
            {"day": "2026-06-22", "summary": "QxM5 누구", "source_session_ids": ["sess-nope"]},
            # no sources, no one named: the household's
            {"day": "2026-06-23", "summary": "QxH1 집"},
        ],
        "profile_items": [
            # 엄마's pair, said to be 아들's: refused
            {"key": "favorite_song", "value": "QxM3", "source_pair_ids": [mom_pair],
             "person_id": SON},
            # two people's pairs: refused, never the household's
            {"key": "favorite_food", "value": "QxM4", "source_pair_ids": [mom_pair, son_pair]},
        ],
    }  # fmt: skip
    cloud.script_sync({"status": 200, "updates": updates})
    probe.turn("g-2", "안녕하세요")  # its pair's sync gets the answer
    eventually(
        lambda: state_rows("SELECT person_id FROM daily_summaries WHERE summary = 'QxH1 집'")
    )
    dailies = state_rows("SELECT summary, person_id FROM daily_summaries ORDER BY day")
    assert dailies == [("QxM2 엄마", MOM), ("QxH1 집", "household")], dailies
    assert state_rows("SELECT key FROM profile_items WHERE value LIKE '%QxM%'") == []
    refused = [line for line in runtime.log().splitlines() if "sync update refused" in line]
    assert len(refused) == 4, refused
    assert not any("QxM" in line or "엄마" in line for line in refused), refused  # ids only
    assert any(f"names {SON}, its sources are {MOM}'s" in line for line in refused), refused
    # and so 아들's turn and a guest's never carry 엄마's words
    probe.turn("s-2", "어제 뭐 했지", **said(SON))
    probe.turn("g-3", "어제 뭐 했지")
    for body in [r["body"] for r in cloud.requests("/v1/a2a/turn")][-2:]:
        assert "QxM" not in json.dumps(body, ensure_ascii=False), body["voice_context"]
