"""The console's pure parts: what an MQTT event may tell the page, and the seed's phases."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from a2a_common.clock import ManualClock
from a2a_common.sqlite import open_state_db
from cache.memory import Memory, MemoryPolicy
from cache.model import CandidateIn
from edge.config.settings import Settings
from edge.console.live import Changes, _change_of
from edge.store.schema import MIGRATIONS
from edge.views.console import PHASES, phase_of
from edge.views.console import memory as console_memory


@pytest.mark.parametrize(
    "payload",
    [
        b"\xff\xfe",
        b"not json",
        b"[1, 2]",
        b'{"workflow_id": 7}',
        b'{"workflow_id": "' + b"w" * 201 + b'"}',
    ],
)
def test_an_event_the_console_cannot_use_is_no_change(payload: bytes) -> None:
    assert _change_of("a2a/v1/robot/workflow/event", payload) is None


def test_only_ids_and_status_words_reach_the_page() -> None:
    body = {"workflow_id": "wf-1", "status": "RUNNING", "evidence": {"said": "고혈압"}, "x": 1}
    change = _change_of("r/workflow/event", json.dumps(body).encode())
    assert change == {"what": "workflow", "workflow_id": "wf-1", "status": "RUNNING"}
    assert _change_of("r/runtime/status", b'{"state": {"no": 1}}') == {
        "what": "status",
        "state": "unknown",
    }


def test_phases_follow_the_seed_order() -> None:
    kinds = ["request", "experience_activation", "goal", "event", "observation", "decision"]
    got = [phase_of({"kind": k, "status": "RUNNING"}) for k in kinds]
    got.append(phase_of({"kind": "event", "status": "WORKFLOW_COMPLETED"}))
    assert got == list(PHASES)
    assert phase_of({"kind": "event", "status": "WORKFLOW_ACCEPTED"}) == "admission"
    assert phase_of({"kind": "finished"}) == "terminal"


def test_a_stream_waits_for_a_change_or_its_beat() -> None:
    changes = Changes()
    assert changes.wait(0, 0.01) == 0  # nothing happened: back after the beat
    changes.bump({"what": "status"})
    assert changes.wait(0, 5) == 1 and changes.last == {"what": "status"}


def test_evidence_is_counted_per_value_inside_the_window(tmp_path: Path) -> None:
    """Issue 30 item 12: the change-of-mind case. 안방 on two days inside the window (and one
    three weeks ago), then 거실 on four days: on main the page's days were kept by key, so 안방
    showed 거실's 4 (the old value's days overwritten), and the window was ignored."""
    settings = Settings(state_dir=str(tmp_path / "state"))
    now = datetime.now(UTC)
    db = open_state_db(settings.state_db_path, MIGRATIONS)
    said = [(21, "안방"), (6, "안방"), (5, "안방"), *((n, "거실") for n in (4, 3, 2, 1))]
    for days_ago, room in said:
        memory = Memory(
            db=db, clock=ManualClock(now - timedelta(days=days_ago)), policy=MemoryPolicy()
        )
        with db.atomic():
            pair_id, session = memory.record_utterance(
                turn_id=f"t-{days_ago}", requested_session=None, text=f"{room} 청정해줘"
            )
            memory.profile.add_evidence(
                CandidateIn("preferred_room", room, "device_pattern"),
                pair_id=pair_id,
                session_id=session,
                source="cloud",
            )
    db.close()

    page = console_memory(settings)
    items = [item for items in page["by_status"].values() for item in items]
    days = {item["value"]: item["evidence_days"] for item in items}
    assert days == {"안방": 2, "거실": 4}  # main: 안방 had 거실's 4 days
    counted = {item["value"]: (item["window_mentions"], item["mentions"]) for item in items}
    assert counted == {"안방": (2, 3), "거실": (4, 4)}  # inside the window; all kept
    assert page["promotion"]["window_days"] == 14
