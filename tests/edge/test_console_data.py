"""The console's pure parts: what an MQTT event may tell the page, and the seed's phases."""

from __future__ import annotations

import json

import pytest

from edge.console.live import Changes, _change_of
from edge.views.console import PHASES, phase_of


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
