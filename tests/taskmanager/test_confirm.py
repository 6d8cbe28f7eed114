"""The pure transitions of a cancel's confirmation (SPEC §4.2): table tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskmanager.catalog import load_catalog, parse_catalog
from taskmanager.confirm import Unconfirmed, Watch, on_callback, on_due, verdict, watch_for
from taskmanager.errors import CatalogError
from taskmanager.events import CancelTask, Command

T0 = datetime(2026, 6, 24, 20, 0, tzinfo=UTC)
TASK = "wf-1:step_move"
STOP = load_catalog().safe_stop("mobility")


def sent(**over: Any) -> Watch:
    cancel = CancelTask("mobility", {"task_id": TASK, "workflow_id": "wf-1", "reason": "pui"})
    watch = watch_for(cancel, "step_move", "move_to_room", 3, T0, 2.0)
    return Watch(**{**watch.to_json(), "sent_at": T0, "due_at": watch.due_at, **over})


def kinds(effects: list[Any]) -> list[str]:
    return [type(e).__name__ for e in effects]


@pytest.mark.parametrize(
    ("watch", "at_s", "phase", "due_s", "effects"),
    [
        (sent(), 1.9, "sent", 2.0, []),  # inside the first window: nothing
        (sent(), 2.0, "resent", 4.0, ["CancelTask"]),  # first window over: the cancel again
        (sent(phase="resent", due_at=T0 + timedelta(seconds=4)), 4.0, "escalated", None,
         ["Command", "Unconfirmed"]),  # second window over: the safe stop, the alarm
        (sent(), 9.0, "escalated", None, ["CancelTask", "Command", "Unconfirmed"]),  # both
        # windows passed while the runtime was down: re-sent and escalated in the same tick
        (sent(phase="escalated", due_at=None), 99.0, "escalated", None, []),  # stays, quiet
    ],
)  # fmt: skip
def test_windows(
    watch: Watch, at_s: float, phase: str, due_s: float | None, effects: list[str]
) -> None:
    new, out = on_due(watch, T0 + timedelta(seconds=at_s), 2.0, STOP)
    assert new.phase == phase
    assert new.due_at == (T0 + timedelta(seconds=due_s) if due_s is not None else None)
    assert kinds(out) == effects


def test_the_safe_stop_command_never_expires_and_names_what_it_stops() -> None:
    watch = sent(phase="resent", due_at=T0)
    _, [command, alarm] = on_due(watch, T0, 2.0, STOP)
    assert isinstance(command, Command) and isinstance(alarm, Unconfirmed)
    assert command.capability_id == "mobility"
    body = command.payload
    assert body["operation_id"] == "stop" and body["safe_stop"] is True
    assert body["task_id"] == TASK + "~safe_stop" and body["stops_task_id"] == TASK
    assert alarm.safe_stop == "mobility.stop"
    _, [bare] = on_due(watch, T0, 2.0, None)  # no safe stop in the catalog: the alarm still
    assert isinstance(bare, Unconfirmed) and bare.safe_stop is None


@pytest.mark.parametrize(
    ("task_id", "seq", "status", "expected"),
    [
        (TASK, 4, "CANCELLED", "confirm"),  # the agent's own CANCELLED is the confirmation
        (TASK, 4, "COMPLETED", "confirm"),  # so is any terminal word: the body stopped
        (TASK, 4, "FAILED", "confirm"),
        (TASK, 3, "CANCELLED", "duplicate"),  # at or below the last applied seq
        (TASK, 4, "PROGRESS", "terminal"),  # still moving: refused as SPEC 2.4 says
        (TASK + "~safe_stop", 1, "RUNNING", "apply"),
        (TASK + "~safe_stop", 2, "COMPLETED", "confirm"),
        (TASK + "~safe_stop", 2, "FAILED", "apply"),  # a failed stop confirms nothing
    ],
)
def test_callbacks(task_id: str, seq: int, status: str, expected: str) -> None:
    assert verdict(sent(), task_id, seq, status) == expected


def test_a_confirmation_says_what_the_body_did() -> None:
    left, confirmed = on_callback(sent(), TASK, 4, "COMPLETED", {"arrived_room": "안방"})
    assert left is None and confirmed is not None
    assert (confirmed.status, confirmed.evidence) == ("COMPLETED", {"arrived_room": "안방"})
    left, confirmed = on_callback(sent(), TASK + "~safe_stop", 1, "RUNNING", None)
    assert confirmed is None and left is not None and left.stop_seq == 1
    left, confirmed = on_callback(sent(), TASK + "~safe_stop", 2, "COMPLETED", None)
    assert left is None and confirmed is not None and confirmed.status == "stopped"


def test_a_watch_survives_its_json() -> None:
    watch = sent(phase="escalated", due_at=None, stop_operation="stop")
    assert Watch.from_json(watch.to_json()) == watch


@pytest.mark.parametrize(
    ("mobility", "says"),
    [
        ({"safe_stop": "halt"}, "must name an operation of this capability"),
        ({"safe_stop": 3}, "must name an operation of this capability"),
        ({"safe_stop": "move"}, "cancelable: false"),  # a cancelable stop would need its own
    ],
)
def test_a_bad_safe_stop_stops_the_start(mobility: dict[str, Any], says: str) -> None:
    op = {"timeout_s": 5, "ack_timeout_s": 1}
    data = {"mobility": {"move": op, "stop": {**op, "cancelable": False}, **mobility}}
    with pytest.raises(CatalogError) as info:
        parse_catalog(data, "custom.json")
    assert "custom.json:mobility.safe_stop" in str(info.value) and says in str(info.value)


def test_the_shipped_catalog_names_a_safe_stop_for_every_capability() -> None:
    catalog = load_catalog()
    stops = {
        cap: op.operation_id for cap in catalog.capabilities() if (op := catalog.safe_stop(cap))
    }
    assert stops == {
        "mobility": "stop",
        "air_purifier": "stop",
        "display": "clear",
        "speaker": "stop",
        "vital_app": "end_session",
        "content": "stop",
    }
