"""Agents' presence (SPEC §4.8): `P/agent/<capability_id>/status`, retained, from each device
agent (`online` with its boot, `offline` as its MQTT will). `DeviceApp` (edge/app/device.py)
exposes `take_agent_status` as its own; it runs in the app's unit of work.

A status whose topic names no valid capability id is refused (`invalid_field`, with `ref`); one
for a capability the catalog does not have is kept and shown, never acted on. A repeat of the
state and boot already known writes nothing and asks nothing of the task manager: a flood of
statuses costs a parse each, not a commit each.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Protocol

from edge.app.parts import AppParts
from edge.channel.topics import AgentStatusMsg, Arrival, Refusal
from edge.host.metrics import Metrics
from taskmanager import TaskManager

log = logging.getLogger(__name__)

CAPABILITY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")  # taskmanager.catalog.NAME


class PresenceParts(AppParts, Protocol):
    @property
    def tm(self) -> TaskManager: ...
    @property
    def metrics(self) -> Metrics: ...


class PresenceInputs:
    def __init__(self, app: PresenceParts) -> None:
        self.app = app

    def take_agent_status(self, msg: AgentStatusMsg, arrival: Arrival) -> None:
        app = self.app
        capability = app.topics.agent_capability(arrival.topic)
        if capability is None or not CAPABILITY.fullmatch(capability):
            ref = {"boot_id": msg.boot_id} if msg.boot_id else None
            refusal = Refusal("invalid_field", "the topic names no capability id")
            app.refuse(arrival.topic, refusal, ref=ref)
            return
        tasks = tuple(dict.fromkeys(msg.tasks))
        known = app.tm.agents.current(capability)
        if known is not None and (known.state, known.boot_id, known.tasks) == (
            msg.state,
            msg.boot_id,
            tasks,
        ):
            return  # nothing new (a repeat, a reconnect's same status): no write, no event
        if app.tm.agents.stale(capability, msg.state, msg.boot_id):
            log.debug(
                "agent %s: offline of boot %s ignored (its boot is %s)",
                capability,
                msg.boot_id,
                known.boot_id if known else "-",
            )
            return
        app.metrics.inc(
            "a2a_agent_status_total", "agent statuses taken in, by state", state=msg.state
        )
        with app.unit() as result:
            agent, applied = app.tm.presence(capability, msg.state, msg.boot_id, tasks, msg.ts)
            result.merge(applied)
        app.after_commit(partial(app.tm.agents.commit, agent))
        if known is None or (known.state, known.boot_id) != (agent.state, agent.boot_id):
            app.after_commit(
                partial(
                    log.info,
                    "agent %s %s (boot %s)%s",
                    capability,
                    agent.state,
                    agent.boot_id or "-",
                    "" if agent.known else ": not in the catalog, shown only",
                )
            )
