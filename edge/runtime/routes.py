"""One typed route table: which payload model each inbound topic takes and which input of the
app it feeds. A handler receives the parsed model of its own route (mypy checks the pair), so
no string table has to agree with another and no handler asserts a type."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic

from edge.app.device import DeviceApp
from edge.channel.topics import (
    AdminRequestMsg,
    AgentStatusMsg,
    Arrival,
    ConsentRequestMsg,
    DeviceContextMsg,
    ForgetMsg,
    Model,
    ObservationMsg,
    PuiEventMsg,
    Refusal,
    TaskCallbackMsg,
    Topics,
    TurnRequestMsg,
    WorkflowRequestMsg,
    parse,
)


@dataclass(frozen=True)
class Route(Generic[Model]):
    model: type[Model]
    handler: Callable[[Model, Arrival], None]
    # what else a refusal of this kind owes its sender (a turn is answered all the same)
    refused: Callable[[bytes, Refusal], None] | None = None

    def take(self, payload: bytes, arrival: Arrival, max_bytes: int) -> Refusal | None:
        """Parse and hand over; the refusal when the payload is not this route's model."""
        parsed = parse(self.model, payload, max_bytes)
        if isinstance(parsed, Refusal):
            return parsed
        self.handler(parsed, arrival)
        return None


def route_table(app: DeviceApp) -> dict[str, Route[Any]]:
    """Every inbound kind (the topic under `P/`) and its input."""
    return {
        "turn/request": Route(TurnRequestMsg, app.take_turn, app.reject_turn),
        "device/context": Route(DeviceContextMsg, app.take_device_context),
        "task/callback": Route(TaskCallbackMsg, app.take_callback),  # the shared one (SPEC 2)
        "task/callback/+": Route(TaskCallbackMsg, app.take_callback),  # one per capability
        "pui/event": Route(PuiEventMsg, app.take_pui, app.reject_pui),
        "workflow/request": Route(WorkflowRequestMsg, app.take_workflow),
        "admin/request": Route(AdminRequestMsg, app.take_admin),
        "memory/forget": Route(ForgetMsg, app.take_forget),
        "consent/request": Route(ConsentRequestMsg, app.take_consent, app.reject_consent),
        "observation": Route(ObservationMsg, app.take_observation),
        "agent/+/status": Route(AgentStatusMsg, app.take_agent_status),  # SPEC 4.8, retained
    }


class Router:
    def __init__(self, topics: Topics, table: dict[str, Route[Any]]) -> None:
        self._topics = topics
        self._table = table

    def subscriptions(self) -> list[str]:
        return [self._topics.under(kind) for kind in self._table]

    def route(self, topic: str) -> Route[Any] | None:
        """The route of an inbound topic of this device; None for any other topic. A kind
        ending in `/+` takes every topic one level below it (`task/callback/<capability>`)."""
        kind = self._topics.kind_of(topic)
        if kind is None:
            return None
        route = self._table.get(kind)
        head, _, last = kind.rpartition("/")
        if route is None and head and last not in ("", "+", "#"):
            route = self._table.get(f"{head}/+")
        parts = kind.split("/")
        if route is None and len(parts) == 3 and parts[1] not in ("", "+", "#"):
            route = self._table.get(f"{parts[0]}/+/{parts[2]}")  # `agent/<capability>/status`
        return route
