"""Workflow requests the device-agent tests push on `P/workflow/request`."""

from __future__ import annotations

from typing import Any


def one_step(workflow_id: str, step_id: str, operation: str, **args: Any) -> dict[str, Any]:
    """A workflow of one step `step_id` running `operation` (`capability.operation`) with
    `args`; its task id is `<workflow_id>:<step_id>`."""
    capability, operation_id = operation.split(".")
    step = {"step_id": step_id, "capability_id": capability, "operation_id": operation_id}
    return {"workflow_id": workflow_id, "steps": [{**step, "args": args}]}
