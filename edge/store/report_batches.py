"""Terminal reports several in one request (SPEC §3.3's batch form): which reports go together
and the body they go in. Pure: the report worker (`edge/store/reports.py`) sends it.

- What goes: the terminal reports waiting at the moment a send starts, in their order, up to
  `BATCH_MAX`; a decision report (one that asks the supervisor) always goes alone, and ends the
  run of terminal reports before it (order is kept). The worker may wait `linger_s` for more
  terminal reports before it takes them (`Reports._linger`, ended by a decision report); one
  report still alone then goes as the single form, as before.
- Each entry keeps its report's own `request_id` — the one its single event or its
  `task_terminal` replay carries — so the cloud dedupes a report whichever road it came by; the
  batch's own `request_id` is kept across the retries of that request.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from taskmanager import Report

# terminal reports in one request: a PUI press over every workflow, or a cloud back after an
# outage, is one request per 32 reports (~0.5 KiB each: ~16 KiB, far under any body limit),
# and a cloud that refuses the form (then answered one by one) is sent at most 32 again
BATCH_MAX = 32
Waiting = tuple[Report, dict[str, Any]]  # a report and its body (request_id, device_id added)
_NOT_IN_ENTRY = ("device_id", "decision_requested")  # the batch's; always false in a batch


def batchable(report: Report) -> bool:
    """A terminal report that asks nothing: a decision event is never batched."""
    return report.terminal and not report.decision_requested


def take(waiting: deque[Waiting], *, batches: bool) -> list[Waiting]:
    """The next send, off the front of `waiting` (not empty): one report, or with `batches`
    the run of batchable reports at the front, up to BATCH_MAX."""
    group = [waiting.popleft()]
    if batches and batchable(group[0][0]):
        while waiting and len(group) < BATCH_MAX and batchable(waiting[0][0]):
            group.append(waiting.popleft())
    return group


def batch_body(request_id: str, device_id: str, bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """`{"request_id","device_id","batch":[{"request_id","workflow_id","experience_id",
    "event","workflow"}, …]}` from the single-form bodies."""
    entries = [{k: v for k, v in b.items() if k not in _NOT_IN_ENTRY} for b in bodies]
    return {"request_id": request_id, "device_id": device_id, "batch": entries}
