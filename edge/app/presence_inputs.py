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

from a2a_common.clock import Clock
from edge.app.parts import AppParts
from edge.channel.topics import AgentStatusMsg, Arrival, Refusal
from edge.host.log import RepeatLimiter
from edge.host.metrics import Metrics
from taskmanager import TaskManager

log = logging.getLogger(__name__)

CAPABILITY = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")  # taskmanager.catalog.NAME


class PresenceParts(AppParts, Protocol):
    @property
    def tm(self) -> TaskManager: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def clock(self) -> Clock: ...


class PresenceInputs:
    def __init__(self, app: PresenceParts) -> None:
        self.app = app
        logs = app.settings.log  # a flood of flips: a bounded number of lines, all counted
        self.said = RepeatLimiter(log, logs.repeat_lines, logs.repeat_window_s, app.clock.monotonic)

    def take_agent_status(self, msg: AgentStatusMsg, arrival: Arrival) -> None:
        app = self.app
        capability = app.topics.agent_capability(arrival.topic)
        if capability is None or not CAPABILITY.fullmatch(capability):
            ref = {"boot_id": msg.boot_id} if msg.boot_id else None
            refusal = Refusal("invalid_field", "the topic names no capability id")
            app.refuse(arrival.topic, refusal, ref=ref)
            return
        in_catalog = capability in app.tm.catalog.capabilities()
        if not app.tm.agents.room_for(capability, in_catalog):
            ref = {"boot_id": msg.boot_id} if msg.boot_id else None
            most = app.tm.agents.max_unknown
            detail = f"at most {most} capabilities the catalog does not have are kept"
            app.refuse(arrival.topic, Refusal("too_many_agents", detail), ref=ref)
            return
        tasks = tuple(dict.fromkeys(msg.tasks))
        known = app.tm.agents.current(capability)
        if known is not None and (known.state, known.boot_id, known.tasks) == (
            msg.state,
            msg.boot_id,
            tasks,
        ):
            return  # nothing new (a repeat, a reconnect's same status): no write, no event
        # a retained status (a SUBSCRIBE's: the first connection, or one whose session the
        # broker lost) is the newest on its topic, whatever this run heard before: the
        # statuses sent while no session held them are gone (seed 5091: a new boot came and
        # went offline meanwhile; its `offline` is the agent's state, not an old boot's will)
        if not arrival.retained and app.tm.agents.stale(capability, msg.state, msg.boot_id):
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
            boot = agent.boot_id or "-"
            if agent.known:  # a change of a catalog agent at INFO, a bounded number a window
                say = partial(self.said.say, f"agent {capability}", logging.INFO)
                app.after_commit(
                    partial(say, "agent %s %s (boot %s)", capability, agent.state, boot)
                )
            else:  # one the catalog does not have: shown only, DEBUG
                line = "agent %s %s (boot %s): not in the catalog, shown only"
                app.after_commit(partial(log.debug, line, capability, agent.state, boot))
