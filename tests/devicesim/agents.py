"""Agents come and go in the simulator (SPEC §4.8, issue 32): every capability's agent keeps a
retained `P/agent/<capability_id>/status` on the simulated broker (`online` with its boot and
the tasks it holds; `offline`, its will, with the boot that died), and the seed draws, from a
generator of its own: a death (the will; its tasks go silent, it hears nothing until it comes
back with a new boot that forgets them), a restart (a new boot at once, the will before it or
not, listing no tasks or none at all), a blip (offline and back with the same boot and its
tasks; the process lived), a flood of flips (one batch of many statuses, a PUI press in its
middle now and then), malformed statuses, a status for a capability the catalog does not have,
and — with the crash fault — the robot's power cut, every agent restarting with it (some back
before the runtime, some after).

The oracles (after every step): no task stays DISPATCHED/RUNNING more than 2 s after its agent
is known offline unless its operation waits (`agent_lost_ends`); a task the agent's new boot
does not list is re-sent (same task_id, attempt + 1, before its deadline) or FAILED
`agent_restarted` as its operation's `on_restart` says (`restart_per_policy`); a motion task in
flight at a power cut is never sent again (`power_cut_motion_not_resent`); a step dispatched to
an agent known offline fails `agent_offline` and no command goes for it, and nothing fails
`agent_offline` while its agent is online (`offline_dispatch_fails`); a press in a flood is
answered once the batch is taken and the broker acknowledged what went, before the clock moves
(`flood_keeps_presses`; the flood's wall time is a figure, `flood_s`); a malformed status is
refused with a reason and changes nothing, one for an unknown capability is kept, shown and
refused nothing (`statuses_refused_or_kept`).

"Known" is the device's side: a status is known once it reached the device (the broker up)
and the storage took it (a status the DB refuses waits at the door with everything after it).

Hooks elsewhere: `Sim.__init__` makes `sim.presence`; `Sim._main` calls `started`; `Sim._one_step`
calls `step` after the fault; `Sim._agents_act` calls `due`; `Sim.crash` calls `crashing`;
`Sim.reconnect` calls `subscribed`; `Agents.hear` skips the commands of `deaf` capabilities;
the boot starts the runtime as the service does (`_recover(presence_first=True)`, `_rearm`)."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from a2a_common.clock import iso, parse_iso
from edge.channel.mqtt import Inbound
from tests.devicesim.oracles import oracle

if TYPE_CHECKING:
    from tests.devicesim.run import Sim

CATALOG: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "taskmanager" / "catalog.json").read_text("utf-8")
)
CAPABILITIES = sorted(CATALOG)
DRAWN = ("mobility", "air_purifier", "speaker")  # the capabilities the simulator's workflows use
UNKNOWN = ("vacuum", "lawn_mower")
LOST_S = 2.0  # SPEC 4.8: within 2 s of `offline` each in-flight task ends as its policy says
IN_FLIGHT = ("DISPATCHED", "RUNNING")
FAULT_P = 0.08  # the chance of an agent fault in a step
KINDS: dict[str, float] = {
    "agent_death": 3,
    "agent_restart": 3,
    "agent_blip": 2,
    "status_flood": 2,
    "status_malformed": 2,
    "status_unknown": 1,
}
POWER_CUT_P = 0.6  # a crash that is the robot's power cut (every agent restarts with it)
MALFORMED: list[tuple[str | None, bytes]] = [  # (topic's capability: None = a drawn one, payload)
    (None, b"{"),
    (None, b"[]"),
    (None, b'{"state": "online"}'),  # online without a boot
    (None, b'{"state": "zombie", "boot_id": "b"}'),
    (None, b'{"state": "online", "boot_id": ""}'),
    (None, b'{"state": "online", "boot_id": "b", "tasks": "wf:step"}'),
    (None, json.dumps({"state": "online", "boot_id": "b", "tasks": ["t"] * 300}).encode()),
    (None, b'{"state": "online", "boot_id": 7}'),
    ("a.b", b'{"state": "online", "boot_id": "b"}'),  # the topic names no capability id
    ("x" * 65, b'{"state": "offline", "boot_id": "b"}'),
]


def policy(capability: str, operation: str) -> dict[str, Any]:
    return dict(CATALOG.get(capability, {}).get(operation) or {})


def motion(capability: str, operation: str) -> bool:
    return policy(capability, operation).get("resource") == "base"


@dataclass
class SimAgent:
    capability: str
    boot: str
    state: str = "online"
    boots: int = 1
    since_index: int = 0  # the wire index its boot began at (the commands it heard since)
    history: list[tuple[int, str]] = field(default_factory=list)  # (wire index, boot) from then

    def boot_at(self, index: int) -> str | None:
        out = None
        for at, boot in self.history:
            if at <= index:
                out = boot
        return out


@dataclass
class Known:
    """A status as the device took it: (wire index then, instant, state, boot)."""

    index: int
    at: datetime
    state: str
    boot: str | None


@dataclass
class Expect:
    """What a status the device took owes a task by the end of the step."""

    task_id: str
    index: int  # the wire index the status was taken at
    resend: bool
    attempt: int
    deadline: datetime | None = None  # a resend is owed only if the device takes it before


@dataclass
class Presence:
    sim: Sim
    rng: random.Random = field(init=False)
    agents: dict[str, SimAgent] = field(default_factory=dict)
    retained: dict[str, bytes] = field(default_factory=dict)  # topic's capability -> payload
    due_events: list[tuple[float, str, str]] = field(default_factory=list)  # (when, cap, what)
    known: dict[str, list[Known]] = field(default_factory=dict)  # the device's, by capability
    unresolved: set[str] = field(default_factory=set)  # statuses sent the device has not taken
    expects: list[Expect] = field(default_factory=list)
    motion_cut: dict[str, int] = field(default_factory=dict)  # task_id -> wire index at the cut
    refusals_owed: list[tuple[str, int, Any, Any]] = field(default_factory=list)
    unknown_owed: list[tuple[str, int]] = field(default_factory=list)
    press_late: list[str] = field(default_factory=list)
    drawn: Counter[str] = field(default_factory=Counter)
    flood_s: list[float] = field(default_factory=list)  # wall time of each flood batch taken
    fresh: bool = False  # a new process: its first connection SUBSCRIBEs
    capabilities: dict[str, str] = field(default_factory=dict)  # task_id -> capability, seen

    def __post_init__(self) -> None:
        self.rng = random.Random(f"agents-{self.sim.seed}")
        for cap in CAPABILITIES:
            self.agents[cap] = SimAgent(cap, self._boot(cap, 1), history=[(0, self._boot(cap, 1))])
            self.retained[cap] = self._body(self.agents[cap], tasks=[])

    # --- the agents' side ---------------------------------------------------------------------
    def _boot(self, cap: str, n: int) -> str:
        return f"{cap}-{self.sim.seed}-b{n}"

    def _body(self, agent: SimAgent, tasks: list[str] | None = None) -> bytes:
        body: dict[str, Any] = {"state": agent.state, "boot_id": agent.boot}
        if tasks is not None:
            body["tasks"] = tasks
        body["ts"] = iso(self.sim.clock.now())
        return json.dumps(body).encode()

    def held(self, cap: str) -> list[str]:
        """The tasks the agent's current boot heard and has not ended."""
        agent, sim = self.agents[cap], self.sim
        prefix = f"{sim.wire.root}/task/command/{cap}"
        ids = {
            str(s.body.get("task_id"))
            for s in sim.wire.sent[agent.since_index :]
            if s.topic == prefix and not s.body.get("safe_stop")
        }
        return sorted(t for t in ids if t not in sim.agents.ended and "~" not in t)

    def _silence(self, cap: str) -> None:
        """Its process is gone: what it was about to say is never said."""
        topic = self.sim.callback_topic(cap)
        self.sim.agents.pending = [p for p in self.sim.agents.pending if p.kind != topic]

    def _publish(self, cap: str, payload: bytes) -> None:
        """An agent's status through the broker: retained, and to the device now if it is
        connected (queued at the broker for its session if not)."""
        self.retained[cap] = payload
        self._deliver([(cap, payload)], retained=False)

    def _die(self, cap: str) -> None:
        agent = self.agents[cap]
        agent.state = "offline"
        self._silence(cap)
        self.sim.agents.deaf.add(cap)
        self._publish(cap, self._body(agent))  # the will

    def _come_back(self, cap: str, *, deliver: bool = True) -> None:
        """A new process: a new boot, no tasks remembered (listed empty, or not at all)."""
        agent, sim = self.agents[cap], self.sim
        self._silence(cap)
        agent.boots += 1
        agent.boot = self._boot(cap, agent.boots)
        agent.state = "online"
        agent.since_index = len(sim.wire.sent)
        agent.history.append((agent.since_index, agent.boot))
        sim.agents.deaf.discard(cap)
        body = self._body(agent, [] if self.rng.random() < 0.5 else None)
        if deliver:
            self._publish(cap, body)
        else:
            self.retained[cap] = body

    # --- draws --------------------------------------------------------------------------------
    async def step(self) -> None:
        """After the step's fault: what the device has taken meanwhile, then maybe a fault."""
        self.resolve()
        if self.rng.random() >= FAULT_P:
            return
        names = sorted(KINDS)
        kind = self.rng.choices(names, [KINDS[n] for n in names])[0]
        self.drawn[kind] += 1
        self.sim.faults[kind] += 1
        self.sim._log(f"fault {kind}")
        rng = self.rng
        cap = rng.choice(DRAWN)
        agent = self.agents[cap]
        now = self.sim.clock.monotonic()
        if kind == "agent_death":
            if agent.state == "offline":
                return
            self._die(cap)
            self._later(now + rng.uniform(3, 60), cap, "restart")
        elif kind == "agent_restart":
            if agent.state == "online" and rng.random() < 0.5:
                self._die(cap)  # the will first, then the new boot at once
            self._come_back(cap)
        elif kind == "agent_blip":
            if agent.state == "offline":
                return
            agent.state = "offline"
            self._publish(cap, self._body(agent))
            self._later(now + rng.uniform(0.2, 10), cap, "blip_back")
        elif kind == "status_flood":
            await self._flood(cap)
        elif kind == "status_malformed":
            topic_cap, payload = rng.choice(MALFORMED)
            self._malformed(topic_cap or cap, payload)
        elif kind == "status_unknown":
            other = rng.choice(UNKNOWN)
            body = {"state": rng.choice(["online", "offline"]), "boot_id": f"{other}-b1"}
            self._unknown(other, json.dumps(body).encode())
        await _settle()

    def _later(self, when: float, cap: str, what: str) -> None:
        self.due_events.append((when, cap, what))

    async def due(self) -> None:
        """Restarts and blips' ends that fell due (in steps and quiet spells alike)."""
        self.resolve()
        now = self.sim.clock.monotonic()
        ready = sorted(e for e in self.due_events if e[0] <= now)
        self.due_events = [e for e in self.due_events if e[0] > now]
        for _when, cap, what in ready:
            agent = self.agents[cap]
            if what == "restart" and agent.state == "offline" and cap in self.sim.agents.deaf:
                self.sim._log(f"agent {cap} restarts")
                self._come_back(cap)
            elif what == "blip_back" and agent.state == "offline" and cap not in self.deaf():
                self.sim._log(f"agent {cap} back (same boot)")
                agent.state = "online"
                self._publish(cap, self._body(agent, self.held(cap)))
        if ready:
            await _settle()

    def quiet(self) -> None:
        """A quiet spell: every agent comes back (as `agents_silent` ends)."""
        now = self.sim.clock.monotonic()
        self.due_events = [(min(w, now), c, what) for w, c, what in self.due_events]

    async def _flood(self, cap: str) -> None:
        """Many flips of one agent (its boot kept; it ends online) in one batch; a PUI press in
        its middle now and then."""
        agent, sim, rng = self.agents[cap], self.sim, self.rng
        if agent.state == "offline":
            return
        n = rng.choice([20, 60, 200])
        bodies = []
        holding = self.held(cap)
        for i in range(n):
            agent.state = "offline" if i % 2 == 0 and i < n - 1 else "online"
            tasks = holding if agent.state == "online" else None
            bodies.append((cap, self._body(agent, tasks)))
        agent.state = "online"
        self.retained[cap] = bodies[-1][1]
        press: tuple[str, bytes] | None = None
        if rng.random() < 0.5 and sim.wire.up and sim.storage_until < 0:
            sim.model.pui_no += 1
            event_id = f"p-{sim.seed}-{sim.model.pui_no}"
            body = {"event_id": event_id, "kind": "cancel"}
            running = [t for t, c in sim.cancelable_tasks() if c != cap]
            sim.model.presses[event_id] = sim.step
            sim.model.press_tasks[event_id] = running
            press = (event_id, json.dumps(body).encode())
        sim._log(f"status flood {cap} ×{n}{' with a press' if press else ''}")
        if press is None:
            self._deliver(bodies, retained=False)
            return
        half = len(bodies) // 2
        started = time.perf_counter()
        self._deliver(bodies[:half], retained=False, press=press, after=bodies[half:])
        self.flood_s.append(time.perf_counter() - started)
        await sim._pubacks()  # the outbox's window: PUBACKs for what went (no clock moves)
        answered = {s.body.get("event_id") for s in sim.wire.topics("pui/result")}
        if press[0] not in answered:
            self.press_late.append(press[0])

    def _malformed(self, cap: str, payload: bytes) -> None:
        sim = self.sim
        taken = sim.wire.up and sim.storage_until < 0
        before = sim.device.app.tm.agents.current(cap)
        sim._log(f"malformed status on agent/{cap}/status {payload[:40]!r}")
        index = len(sim.wire.sent)
        self._deliver([(cap, payload)], retained=False, track=False)
        if taken:  # judged now: a later status of this step may change the agent lawfully
            after = sim.device.app.tm.agents.current(cap)
            self.refusals_owed.append((f"{sim.wire.root}/agent/{cap}/status", index, after, before))

    def _unknown(self, cap: str, payload: bytes) -> None:
        sim = self.sim
        sim._log(f"status for unknown capability {cap} {payload.decode()}")
        index = len(sim.wire.sent)
        self.retained[cap] = payload
        self._deliver([(cap, payload)], retained=False, track=False)
        if sim.wire.up and sim.storage_until < 0:
            self.unknown_owed.append((cap, index))

    # --- the broker ---------------------------------------------------------------------------
    def _deliver(
        self,
        statuses: list[tuple[str, bytes]],
        *,
        retained: bool,
        press: tuple[str, bytes] | None = None,
        after: list[tuple[str, bytes]] | None = None,
        track: bool = True,
    ) -> None:
        """Statuses (and a press) to the device in one batch, as the broker delivers them."""
        sim = self.sim
        msgs: list[Inbound] = []
        order = [*statuses, *([("", press[1])] if press else []), *(after or [])]
        for cap, payload in order:
            kind = f"agent/{cap}/status" if cap else "pui/event"
            msg = sim.wire.inbound(kind, payload)
            if retained:
                msg = replace(msg, retained=True)
            msgs.append(msg)
        caps = Counter(c for c, _ in order if c)
        index = len(sim.wire.sent)
        if not sim.wire.up or sim.storage_until >= 0:  # taken later: unknown until then
            if track:
                self.unresolved.update(caps)
                for cap in caps:
                    self.known.setdefault(cap, []).append(Known(index, sim.clock.now(), "?", None))
            if not sim.wire.up:
                sim.wire.queued.extend(msgs)
                return
        elif track:
            for cap, payload in order:
                if cap:
                    self._expect(cap, payload)
        for msg in msgs:
            sim.wire.unacked[msg.mid] = msg
            sim._note_reached(msg)
        sim.device.take(msgs)
        if not track or sim.storage_until >= 0:
            return
        for cap, n in sorted(caps.items()):
            if n > 1:  # flipping while the batch is taken: either state is the device's
                self.known.setdefault(cap, []).append(Known(index, sim.clock.now(), "?", None))
        last = {cap: payload for cap, payload in order if cap}
        for cap, payload in sorted(last.items()):
            self._took(cap, payload, index if caps[cap] == 1 else len(sim.wire.sent))

    def _took(self, cap: str, payload: bytes, index: int | None = None) -> None:
        body = json.loads(payload)
        sim = self.sim
        at = len(sim.wire.sent) if index is None else index
        entry = Known(at, sim.clock.now(), body["state"], body.get("boot_id"))
        self.known.setdefault(cap, []).append(entry)

    def _expect(self, cap: str, payload: bytes) -> None:
        """Before the device takes a status (the broker up, the storage taking writes): what
        a new boot owes each task in flight that it does not list."""
        sim = self.sim
        if sim.storage_until >= 0 or cap not in CATALOG:
            return
        body = json.loads(payload)
        if body["state"] != "online":
            return
        agent = self.agents[cap]
        commanded: dict[str, int] = {}
        for index, s in enumerate(sim.wire.sent):
            if s.topic == f"{sim.wire.root}/task/command/{cap}" and not s.body.get("safe_stop"):
                commanded[str(s.body.get("task_id"))] = index
        listed = set(body.get("tasks") or [])
        now = sim.clock.now()
        board = sim.device.app.tm.board
        for wf_id in sorted(board.workflows):
            for step in board.workflows[wf_id].steps:
                task_id = step.task_id(wf_id)
                if (
                    step.kind != "task"
                    or step.capability_id != cap
                    or step.status not in IN_FLIGHT
                    or task_id in listed
                    or task_id not in commanded  # never reached the agent: no boot heard it
                    or agent.boot_at(commanded[task_id]) == body.get("boot_id")
                ):
                    continue
                live = step.deadline is None or now < step.deadline
                resend = policy(cap, step.operation_id).get("on_restart") == "resend" and live
                index = len(sim.wire.sent)
                self.expects.append(Expect(task_id, index, resend, step.attempt, step.deadline))

    def resolve(self) -> None:
        """Statuses the device had not taken (the broker down, the storage refusing) are taken
        once both are back: the device knows the latest (a kept session delivers the queue in
        order; a new one, the retained status at the SUBSCRIBE)."""
        sim = self.sim
        if not self.unresolved or not sim.wire.up or sim.storage_until >= 0:
            return
        for cap in sorted(self.unresolved):
            if cap in self.retained:
                self._took(cap, self.retained[cap])
        self.unresolved.clear()

    def deaf(self) -> set[str]:
        return self.sim.agents.deaf

    def latest(self, cap: str) -> Known | None:
        seen = self.known.get(cap)
        return seen[-1] if seen else None

    def state_at(self, cap: str, index: int) -> Known | None:
        """The status the device had taken before wire index `index`."""
        out = None
        for entry in self.known.get(cap, []):
            if entry.index <= index:
                out = entry
        return out

    # --- the robot ----------------------------------------------------------------------------
    def started(self) -> None:
        """The first start: the agents' retained statuses at the SUBSCRIBE."""
        self.subscribed(first=True)

    def crashing(self) -> None:
        """Before the crash drops the process: a power cut now and then — every agent restarts
        with the robot (back before the runtime's start, or later: its will retained till then);
        the motion tasks in flight then must never be sent again."""
        sim = self.sim
        sim.wire.receiving = asyncio.Event()  # a new process: no SUBACK yet
        self.fresh = True
        for cap in self.known:  # the new process knows nothing until the retained statuses
            self.known[cap].append(Known(len(sim.wire.sent), sim.clock.now(), "?", None))
        self.unresolved.clear()
        self.expects.clear()
        if self.rng.random() >= POWER_CUT_P:
            return
        sim.faults["power_cut"] += 1
        self.drawn["power_cut"] += 1
        board = sim.device.app.tm.board
        commanded = {
            s.body.get("task_id") for s in sim.wire.sent if "/task/command/" in s.topic
        }  # a move the body heard (one the DB never took is not in flight: its request comes again)
        for wf_id in sorted(board.workflows):
            for step in board.workflows[wf_id].steps:
                task_id = step.task_id(wf_id)
                if (
                    step.status in IN_FLIGHT
                    and motion(step.capability_id, step.operation_id)
                    and task_id in commanded
                ):
                    self.motion_cut[task_id] = len(sim.wire.sent)
        now = sim.clock.monotonic()
        self.due_events = [e for e in self.due_events if e[1] not in self.agents]
        for cap in CAPABILITIES:
            agent = self.agents[cap]
            agent.state = "offline"
            self._silence(cap)
            sim.agents.deaf.add(cap)
            self.retained[cap] = self._body(agent)  # the will (the broker is up: a separate box)
            if self.rng.random() < 0.7:
                self._come_back(cap, deliver=False)  # up before the runtime: retained for it
            else:
                self._later(now + self.rng.uniform(1, 30), cap, "restart")
        sim._log(f"power cut: motion in flight {sorted(self.motion_cut)}")

    def subscribed(self, *, first: bool = False, session_kept: bool = True) -> None:
        """The broker delivers the retained statuses at a SUBSCRIBE: a process's first
        connection, or one without a kept session (edge/channel/mqtt.py)."""
        sim = self.sim
        if first or self.fresh or not session_kept:
            self.fresh = False
            items = sorted(self.retained.items())
            self._deliver([(c, p) for c, p in items if c in CATALOG], retained=True)
            for cap, payload in items:
                if cap not in CATALOG:
                    self._deliver([(cap, payload)], retained=True, track=False)
        sim.wire.receiving.set()


async def _settle() -> None:
    from tests.devicesim.loop import settle

    await settle()


def _in_flight(sim: Sim) -> list[tuple[str, Any]]:
    board = sim.device.app.tm.board
    return [
        (step.task_id(wf_id), step)
        for wf_id in sorted(board.workflows)
        for step in board.workflows[wf_id].steps
        if step.kind == "task" and step.status in IN_FLIGHT
    ]


# --- the oracles --------------------------------------------------------------------------------
@oracle("agent_lost_ends")
def agent_lost_ends(sim: Sim, _before: int) -> list[str]:
    out = []
    now = sim.clock.now()
    for task_id, step in _in_flight(sim):
        last = sim.presence.latest(step.capability_id)
        if last is None or last.state != "offline":
            continue  # online, or not taken yet ("?")
        if policy(step.capability_id, step.operation_id).get("on_agent_lost") == "wait":
            continue
        if now - last.at > timedelta(seconds=LOST_S):
            out.append(
                f"{task_id} still {step.status} {(now - last.at).total_seconds():.1f} s after"
                f" its agent {step.capability_id} was known offline"
            )
    return out


@oracle("restart_per_policy")
def restart_per_policy(sim: Sim, _before: int) -> list[str]:
    out = []
    presence = sim.presence
    expects, presence.expects = presence.expects, []
    for ex in expects:
        sent = sim.wire.sent[ex.index :]
        if ex.resend and _taken_late(sim, ex):
            continue  # the device took the status past the deadline: it ends the task instead
        if ex.resend and _cancelled(sim, ex):
            continue  # a press (or a cancel) ended it before its re-send left (seed 77)
        if ex.resend:
            again = [
                s.body
                for s in sent
                if "/task/command/" in s.topic and s.body.get("task_id") == ex.task_id
            ]
            if not any(b.get("attempt") == ex.attempt + 1 for b in again):
                out.append(f"{ex.task_id} (on_restart resend) not re-sent attempt {ex.attempt + 1}")
            past = [
                s
                for s in sent
                if _command_of(s, ex.task_id)
                and s.at is not None
                and parse_iso(str(s.body.get("deadline"))) < s.at
            ]
            out += [f"{ex.task_id} re-sent past its deadline" for _ in past[:1]]
        else:
            failed = [
                s.body
                for s in sim.wire.topics("workflow/event", ex.index)
                if s.body.get("task_id") == ex.task_id and s.body.get("status") == "FAILED"
            ]
            if not any(b.get("reason") == "agent_restarted" for b in failed):
                out.append(f"{ex.task_id} (on_restart fail, or late) not FAILED agent_restarted")
            resent = [s for s in sent if _command_of(s, ex.task_id)]
            out += [f"{ex.task_id} re-sent though its policy fails it" for _ in resent[:1]]
    return out


def _cancelled(sim: Sim, ex: Expect) -> bool:
    """The task ended CANCELLED since the status with no re-send before: a command for a
    cancelled task is dropped unsent, as it should be (seed 77: a press with the restart)."""
    for s in sim.wire.sent[ex.index :]:
        if _command_of(s, ex.task_id):
            return False
        body = s.body if isinstance(s.body, dict) else {}
        ended = body.get("task_id") == ex.task_id and body.get("status") == "CANCELLED"
        if ended and "workflow/event" in s.topic:
            return True
    return False


def _taken_late(sim: Sim, ex: Expect) -> bool:
    """The device reacted to the status (its first event for the task since) at or past the
    task's deadline — the clock moved between the status and its taking (seed 617: a day
    passed while the status waited to be delivered)."""
    reacted = [
        s.at
        for s in sim.wire.topics("workflow/event", ex.index)
        if s.body.get("task_id") == ex.task_id and s.at is not None
    ]
    when = reacted[0] if reacted else sim.clock.now()
    return ex.deadline is not None and when >= ex.deadline


def _command_of(sent: Any, task_id: str) -> bool:
    return "/task/command/" in sent.topic and sent.body.get("task_id") == task_id


@oracle("power_cut_motion_not_resent")
def power_cut_motion_not_resent(sim: Sim, before: int) -> list[str]:
    cut = sim.presence.motion_cut
    return [
        f"motion task {s.body.get('task_id')} in flight at a power cut sent again"
        for index, s in enumerate(sim.wire.sent[before:], start=before)
        if "/task/command/" in s.topic and cut.get(s.body.get("task_id"), index + 1) <= index
    ]


@oracle("offline_dispatch_fails")
def offline_dispatch_fails(sim: Sim, before: int) -> list[str]:
    out = []
    presence = sim.presence
    _capability_of(sim, "")  # notes every task's capability while its workflow is known
    for index in range(before, len(sim.wire.sent)):
        s = sim.wire.sent[index]
        body = s.body
        if "/task/command/" in s.topic and not body.get("safe_stop"):
            cap = str(body.get("capability_id"))
            op = str(body.get("operation_id"))
            known = presence.state_at(cap, index)
            lost = known is not None and known.state == "offline"
            if lost and policy(cap, op).get("on_agent_lost") != "wait":
                out.append(f"{body.get('task_id')} commanded to {cap}, known offline")
        elif (
            s.topic.endswith("/workflow/event")
            and body.get("reason") == "agent_offline"
            and body.get("task_id")  # a step's event (the workflow's names no task)
        ):
            # an event may wait in the outbox: one made while the agent was known offline (or
            # while the device may have known it) at any time before it reached the wire
            task_id = str(body.get("task_id"))
            cap = _capability_of(sim, task_id)
            if cap is None:
                continue  # its workflow forgotten meanwhile (a forget of everything)
            seen = [k for k in presence.known.get(cap, []) if k.index <= index]
            if not any(k.state in ("offline", "?") for k in seen):
                out.append(f"{task_id} failed agent_offline though {cap} was never known offline")
    return out


def _capability_of(sim: Sim, task_id: str) -> str | None:
    seen = sim.presence.capabilities
    for wf_id, wf in sim.device.app.tm.board.workflows.items():
        for step in wf.steps:
            seen[step.task_id(wf_id)] = step.capability_id
    if task_id in seen:
        return seen[task_id]
    workflow_id, _, step_id = task_id.rpartition(":")
    wf = sim.device.app.tm.board.workflows.get(workflow_id)
    step = wf.step(step_id) if wf is not None else None
    if step is not None:
        return str(step.capability_id)
    rows = sim.rows("SELECT doc FROM workflows WHERE workflow_id = ?", workflow_id)
    for (doc,) in rows:
        for raw in json.loads(doc).get("steps", []):
            if raw.get("step_id") == step_id:
                return str(raw.get("capability_id"))
    return None


@oracle("flood_keeps_presses")
def flood_keeps_presses(sim: Sim, _before: int) -> list[str]:
    late, sim.presence.press_late = sim.presence.press_late, []
    return [f"PUI press {e} in a status flood not answered when its batch was taken" for e in late]


@oracle("statuses_refused_or_kept")
def statuses_refused_or_kept(sim: Sim, _before: int) -> list[str]:
    out = []
    presence = sim.presence
    owed, presence.refusals_owed = presence.refusals_owed, []
    for topic, index, after, before in owed:
        errors = [s.body for s in sim.wire.topics("runtime/error", index)]
        if not any(b.get("topic") == topic and b.get("error") for b in errors):
            out.append(f"malformed status on {topic} not refused with a reason")
        if after != before:
            out.append(f"malformed status on {topic} changed the agent's state")
    unknown, presence.unknown_owed = presence.unknown_owed, []
    full = {f"{sim.wire.root}/agent/{c}/status" for c, _ in unknown}
    for cap, index in unknown:
        shown = {v["capability_id"]: v for v in sim.device.app.tm.agents.views()}
        if cap not in shown or shown[cap]["known"]:
            out.append(f"status for unknown capability {cap} not kept and shown ({shown.get(cap)})")
        errors = [s.body for s in sim.wire.topics("runtime/error", index)]
        out += [f"status for unknown {cap} refused: {b}" for b in errors if b.get("topic") in full]
    return out
