"""docs/contract.md §3.3 says what reaches the planner as a terminal event, as the runtime does
it (taskmanager/steps.py `end_step`, settle.py): the default step statuses are the code's, and a
step the runtime cancels is said to be reported in the workflow's WORKFLOW_CANCELLED alone
(tests/taskmanager/test_core.py::test_a_step_the_runtime_cancels_is_reported_once_as_the_workflows_end
shows the runtime doing so). On main the page said every CANCELLED step is a terminal event,
while a PUI cancel mid-move reached the planner only as WORKFLOW_CANCELLED."""

from __future__ import annotations

import re

from taskmanager.model import DEFAULT_TERMINAL_EVENTS
from tests.docs.contract_doc import CONTRACT


def section(number: str) -> str:
    text = CONTRACT.read_text(encoding="utf-8")
    start = text.index(f"### §{number} ")
    end = text.find("\n### ", start + 1)
    return text[start:end]


def test_the_default_terminal_events_are_the_codes() -> None:
    said = re.search(r"by default ((?:`[A-Z_]+`(?:, | and )?)+)", " ".join(section("3.3").split()))
    assert said, "§3.3 names no default terminal events"
    steps = [s for s in DEFAULT_TERMINAL_EVENTS if not s.startswith("WORKFLOW_")]
    assert re.findall(r"`([A-Z_]+)`", said.group(1)) == steps


def test_a_step_the_runtime_cancels_is_said_to_be_reported_as_the_workflows_end() -> None:
    text = " ".join(section("3.3").split())
    assert "a step the runtime cancels (a PUI press" in text
    assert "is reported once, in the workflow's `WORKFLOW_CANCELLED`" in text
