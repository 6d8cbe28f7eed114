"""The simulator's run: a seed, a state dir, steps. Each step: the clock moves, at most one
fault is drawn, one input is drawn, the agents' due callbacks arrive, the loop settles, every
oracle checks. Every few dozen steps (and at the end) a quiet spell lets what is owed happen,
and the oracles that need it (every turn answered, every workflow ended) check then.

Adding a fault: a branch in `Sim.fault` and a weight in `FAULTS`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from a2a_common.clock import ManualClock, parse_iso
from edge.channel.mqtt import Inbound
from edge.config.settings import Settings
from tests.devicesim import people as _people  # noqa: F401  (registers its input and oracle)
from tests.devicesim import routine as _routine  # noqa: F401  (registers its inputs)
from tests.devicesim.agents import Presence
from tests.devicesim.cloud import SimCloud
from tests.devicesim.device import Boot, boot
from tests.devicesim.loop import VirtualLoop, restore_ids, seed_ids, settle
from tests.devicesim.oracles import ORACLES, Violation, check_quiet, check_step
from tests.devicesim.peers import INPUTS, STEP_ONLY, Agents
from tests.devicesim.wire import SimWire

DEVICE = "robot-sim"
ROOT = f"a2a/{DEVICE}"
T0 = datetime(2026, 6, 24, 20, 0, tzinfo=UTC)
QUIET_EVERY = 60  # steps between quiet spells
QUIET_MAX = 400  # 3 s each: a quiet spell lasts at most 20 simulated minutes
FAULTS: dict[str, float] = {
    "none": 80,
    "crash": 3,
    "storage": 3,  # refuses writes for a few steps
    "broker_drop": 2,  # the connection (session kept)
    "session_lost": 1,
    "cloud_down": 2,
    "cloud_slow": 2,
    "cloud_hostile": 1,
    "cloud_409": 1,
    "agents_silent": 1,
    "clock_jump": 1,
    "day_passes": 1,
}


@dataclass
class Model:
    """What the peers sent and what the device accepted, as the oracles need it."""

    turn_no: int = 0
    pui_no: int = 0
    wf_no: int = 0
    forget_no: int = 0
    consent_no: int = 0
    obs_no: int = 0
    admin_no: int = 0
    turn_bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    markers: dict[str, str] = field(default_factory=dict)  # marker -> turn_id
    sensitive: dict[str, bool] = field(default_factory=dict)  # marker -> consented when said
    forgotten: dict[str, int] = field(default_factory=dict)  # marker -> wire index of the forget
    forgets: dict[str, list[str]] = field(default_factory=dict)  # request_id -> its markers
    consents: dict[str, dict[str, Any]] = field(default_factory=dict)
    presses: dict[str, int] = field(default_factory=dict)  # event_id -> step
    press_tasks: dict[str, list[str]] = field(default_factory=dict)  # its running tasks then
    pushed: dict[str, str] = field(default_factory=dict)  # workflow_id -> room
    early: set[str] = field(default_factory=set)
    reached: set[str] = field(default_factory=set)  # turn ids the device took in
    # task_id -> callbacks the agents sent for it: (inbound mid, when, wire index then, body)
    callbacks: dict[str, list[tuple[int, datetime, int, dict[str, Any]]]] = field(
        default_factory=dict
    )
    pressed_reached: set[str] = field(default_factory=set)  # PUI presses the device took in
    people: dict[str, str] = field(default_factory=dict)  # marker -> whose (devicesim/people.py)


class LogTap(logging.Handler):
    """Every log line of a run (INFO and up), for the forget oracle."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(record.getMessage())
        except Exception:
            self.lines.append(str(record.msg))


class SimFailure(AssertionError):
    """An oracle violated; `.sim` is the run (its step, its violations, its trace)."""

    def __init__(self, message: str, sim: Sim) -> None:
        super().__init__(message)
        self.sim = sim


class Sim:
    def __init__(self, seed: int, workdir: Path, stream: str = "step") -> None:
        self.seed = seed
        # `step`: each step draws from a generator of its own (seed, step), so a step the
        # shrinker leaves out changes no later step's draws; `one`: one generator for the whole
        # run, as the seeds found before shrinking existed were drawn (their pinned tests)
        self.stream = stream
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.clock = ManualClock(T0)
        self.wire = SimWire(ROOT, self.clock)
        self.cloud = SimCloud(rng=random.Random(f"cloud-{seed}"))
        self.model = Model()
        self.agents = Agents(self)
        self.presence = Presence(self)  # agents come and go (devicesim/agents.py, SPEC 4.8)
        self.step = 0
        self.trace: list[str] = []
        self.faults: Counter[str] = Counter()
        self.inputs: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()
        self.storage_until = -1  # step
        self.broker_until = -1
        self.cloud_until = -1
        self.crashes = 0
        self.tap = LogTap()
        self.settings = Settings.model_validate(
            {
                "device_id": DEVICE,
                "state_dir": str(workdir / "state"),
                "taskmanager": {"cancel_confirm_s": 5},
                "cloud": {"turn_deadline_s": 3},
            }
        )
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "config.toml"
        self.config.write_text(f'device_id = "{DEVICE}"\nstate_dir = "{workdir / "state"}"\n')
        self.boot: Boot | None = None
        self.skip: frozenset[int] = frozenset()  # steps whose fault and input are left out
        self.oracle_state: dict[str, Any] = {}  # what an oracle keeps between its checks
        self.violation: list[Violation] = []  # what failed the run
        self.per_capability = True  # agents answer on their own topic (set at the first boot)

    # --- what peers and oracles use -----------------------------------------------------------
    @property
    def device(self) -> Boot:
        assert self.boot is not None
        return self.boot

    def kind(self, topic: str) -> str:
        return topic[len(ROOT) + 1 :] if topic.startswith(ROOT + "/") else topic

    def send(self, kind: str, body: Any) -> None:
        self.send_raw(kind, json.dumps(body, ensure_ascii=False).encode("utf-8"))

    def callback_topic(self, capability: str) -> str:
        """An agent's own callback topic (SPEC 2); the shared one on a device without them
        (a build before issue 30, where the simulator replays the seams' breaks)."""
        return f"task/callback/{capability}" if self.per_capability else "task/callback"

    def send_raw(self, kind: str, payload: bytes) -> None:
        msg = self.wire.inbound(kind, payload)
        if not self.wire.up:
            self.wire.queued.append(msg)
            return
        self.wire.unacked[msg.mid] = msg
        self._note_reached(msg)
        self.device.take([msg])

    def _note_callback(self, mid: int, payload: bytes) -> None:
        """A callback as the device receives it (when, and where the wire was then)."""
        try:
            body = json.loads(payload)
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("task_id"), str):
            taken = (mid, self.clock.now(), len(self.wire.sent), body)
            self.model.callbacks.setdefault(body["task_id"], []).append(taken)

    def _note_reached(self, msg: Inbound, ended: set[str] | None = None) -> None:
        """What the oracles need of a message the device receives now; `ended`: the tasks
        whose own agent's terminal callback came earlier in the same delivery."""
        topic, payload = msg.topic, msg.payload
        if self.kind(topic).startswith("task/callback"):
            self._note_callback(msg.mid, payload)
            if ended is not None:
                ended.update(self._ends_own(topic, payload))
        if self.kind(topic) == "pui/event":
            try:
                event_id = json.loads(payload)["event_id"]
                self.model.pressed_reached.add(event_id)
            except (ValueError, KeyError, TypeError):
                return
            # the tasks it stops are those still running when it comes in: one whose agent's
            # COMPLETED was held (storage) and applied first, or came first, owes no cancel
            running = {t for t, _cap in self.cancelable_tasks()} - (ended or set())
            owed = self.model.press_tasks.get(event_id, [])
            self.model.press_tasks[event_id] = [t for t in owed if t in running]
        if self.kind(topic) == "turn/request":
            try:
                turn_id = json.loads(payload).get("turn_id")
            except (ValueError, AttributeError):
                return
            if isinstance(turn_id, str) and turn_id:
                self.model.reached.add(turn_id)

    def _ends_own(self, topic: str, payload: bytes) -> list[str]:
        """A terminal callback on its task's own capability topic (or the shared one)."""
        try:
            body = json.loads(payload)
            task_id, status = body["task_id"], body["status"]
        except (ValueError, KeyError, TypeError):
            return []
        if status not in ("COMPLETED", "FAILED", "CANCELLED"):
            return []
        caps = dict(self.running_tasks())
        own = self.kind(topic) == "task/callback" or topic.endswith(f"/{caps.get(task_id)}")
        return [task_id] if own else []

    def consented(self, scope_name: str, at: datetime | None = None) -> bool:
        """Whether the device held consent for a category at `at` (default: now), as its own
        append-only record says (`consent_audit`: every grant, revoke and noticed expiry, with
        the instant); at the very instant of a change either side counts (within a millisecond
        the order of a turn and a grant is not the oracle's)."""
        at = at or self.clock.now()
        rows = self.rows(
            "SELECT ts, action, expires_at FROM consent_audit WHERE scope = ? ORDER BY id",
            f"category:{scope_name}",
        )
        held_before, sides = False, []
        for ts, action, expires_at in rows:
            when = parse_iso(ts)
            held = action == "grant" and (expires_at is None or parse_iso(expires_at) > at)
            if when < at:
                held_before = held
            elif when == at:
                sides.append(held)
        return held_before or any(sides)

    def active(self) -> list[str]:
        return sorted(self.device.app.tm.active_ids())

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.device.app.memory.db.execute(sql, list(args)).fetchall()]

    def spoken_markers(self) -> dict[str, str]:
        """Markers whose turns left a pair, not forgotten yet: marker -> pair_id."""
        out = {}
        for marker, turn_id in self.model.markers.items():
            if marker in self.model.forgotten:
                continue
            rows = self.rows("SELECT pair_id FROM pairs WHERE turn_id = ?", turn_id)
            if rows:
                out[marker] = str(rows[0][0])
        return out

    def _tasks(
        self, statuses: tuple[str, ...], *, cancelable: bool = False
    ) -> list[tuple[str, str]]:
        board = self.device.app.tm.board
        return [
            (f"{wf_id}:{step.step_id}", step.capability_id)
            for wf_id in sorted(board.workflows)
            for step in board.workflows[wf_id].steps
            if step.status in statuses
            and step.kind == "task"
            and (step.cancelable or not cancelable)
        ]

    def cancelable_tasks(self) -> list[tuple[str, str]]:
        """Running tasks a cancel stops (a stop operation is not cancelable: it runs out)."""
        return self._tasks(("DISPATCHED", "RUNNING"), cancelable=True)

    def cancels_watched(self) -> list[tuple[str, str]]:
        """Cancelled tasks whose agent has not confirmed yet: (task_id, capability)."""
        watches = self.device.app.tm.watches.watches
        return [(t, w.capability_id) for t, w in sorted(watches.items()) if w.phase != "escalated"]

    def queued_tasks(self) -> list[tuple[str, str]]:
        return self._tasks(("QUEUED",))

    def running_tasks(self) -> list[tuple[str, str]]:
        return self._tasks(("DISPATCHED", "RUNNING"))

    # --- the run --------------------------------------------------------------------------------
    def run(self, steps: int) -> list[str]:
        saved = seed_ids(self.seed)
        outer_random = random.getstate()
        random.seed(f"global-{self.seed}")  # tenacity's jitter, anything else that draws
        root = logging.getLogger()
        root.addHandler(self.tap)
        level = root.level
        root.setLevel(logging.INFO)
        loop = VirtualLoop(self.clock)
        try:
            loop.run_until_complete(self._main(steps))
        finally:
            root.removeHandler(self.tap)
            root.setLevel(level)
            restore_ids(saved)
            random.setstate(outer_random)
            loop.close()
        return self.trace

    async def _main(self, steps: int) -> None:
        self.boot = boot(self.settings, self.clock, self.wire, self.cloud, self.config)
        self.per_capability = (
            self.device.runtime._router.route(f"{ROOT}/task/callback/x") is not None
        )
        self.device.runtime.take_connection(True)
        self.presence.started()
        try:
            for _ in range(steps):
                self.step += 1
                await self._one_step()
                if self.step % QUIET_EVERY == 0:
                    await self._quiet()
            await self._quiet()
        finally:
            if self.boot is not None:
                self.boot.crash()
            await settle()

    def _log(self, line: str) -> None:
        self.trace.append(f"{self.step:05d} {self.clock.monotonic():10.2f} {line}")

    async def _one_step(self) -> None:
        self.wire.step = self.cloud.step = self.step
        if self.stream == "step":
            self.rng = random.Random(f"{self.seed}/{self.step}")
        before = len(self.wire.sent)
        self.clock.advance(self.rng.choice([0.0, 0.2, 0.5, 1.0, 2.0, 5.0]))
        await self._end_faults()
        fault = self._draw(FAULTS)
        skipped = self.step in self.skip  # shrinking (devicesim/shrink.py): drawn, not done
        if fault != "none" and not skipped:
            self.faults[fault] += 1
            await self.fault(fault)
        await self.presence.step()
        one = self.stream == "one"
        name = self._draw({k: w for k, (w, _) in INPUTS.items() if not (one and k in STEP_ONLY)})
        said = None if skipped else INPUTS[name][1](self)
        if said is not None:
            self.inputs[name] += 1
            self._log(said)
        await self._agents_act()
        self._log(f"out {_digest(self.wire.sent[before:], self.kind)}")
        violations = check_step(self, before)
        self._fail(violations)

    def _draw(self, weights: dict[str, float]) -> str:
        names = sorted(weights)
        return self.rng.choices(names, [weights[n] for n in names])[0]

    async def _agents_act(self) -> None:
        await settle()
        await self.presence.due()
        for _ in range(3):  # what agents answer may make more commands: a few rounds
            self.agents.hear()
            due = self.agents.due()
            for item in due:
                self._log(f"agent {item.kind} {item.payload.decode()}")
                self.send_raw(item.kind, item.payload)
            self.device.background()
            await self._pubacks()
            if not due:
                break
        if self.step % 20 == 0:
            self.device.housekeeping()
            await settle()

    async def _pubacks(self) -> None:
        """The broker's PUBACKs for everything delivered (each may let the outbox hand more)."""
        await settle()
        for _ in range(100):
            if not (self.wire.up and self.wire.unpubacked):
                return
            mids, self.wire.unpubacked = self.wire.unpubacked, []
            for mid in mids:
                self.device.runtime.take_puback(mid)
            await settle()

    # --- faults -------------------------------------------------------------------------------
    async def fault(self, name: str) -> None:
        rng = self.rng
        self._log(f"fault {name}")
        if name == "crash":
            await self.crash()
        elif name == "storage":
            self.storage_until = self.step + rng.randint(1, 8)
            self.device.refuse_writes(True)
        elif name in ("broker_drop", "session_lost") and self.wire.up:
            self.wire.drop()
            self.device.runtime._on_disconnected("simulated")
            self.broker_until = self.step + rng.randint(1, 6)
            self.session_kept = name == "broker_drop"
        elif name.startswith("cloud_"):
            if name == "cloud_409":
                self.cloud.conflicts += rng.randint(1, 3)
                return
            self.cloud.mode = {
                "cloud_down": "down",
                "cloud_slow": "slow",
                "cloud_hostile": "hostile",
            }[name]
            self.cloud_until = self.step + rng.randint(1, 10)
        elif name == "agents_silent":
            self.agents.silent_until = self.clock.monotonic() + rng.uniform(5, 60)
        elif name == "clock_jump":
            self.clock.advance(rng.choice([30, 300, 3600]))
        elif name == "day_passes":
            self.clock.advance(86400)

    async def _end_faults(self) -> None:
        if 0 <= self.storage_until <= self.step:
            self.storage_until = -1
            self.device.refuse_writes(False)
            self._log("storage back")
            self.device.door.retry_now()
        if 0 <= self.broker_until <= self.step:
            self.broker_until = -1
            await self.reconnect(getattr(self, "session_kept", True))
        if 0 <= self.cloud_until <= self.step:
            self.cloud_until = -1
            self.cloud.mode = "up"
            self.cloud.release()
            self._log("cloud back")
        await settle()

    async def reconnect(self, session_kept: bool) -> None:
        redelivered = self.wire.connect(session_kept=session_kept)
        self._log(
            f"broker back (session {'kept' if session_kept else 'lost'}, {len(redelivered)} in)"
        )
        self.device.runtime.take_connection(session_kept)
        ended: set[str] = set()
        for msg in redelivered:
            self.wire.unacked[msg.mid] = msg
            self._note_reached(msg, ended)
        if redelivered:
            self.device.take(redelivered)
        self.presence.subscribed(session_kept=session_kept)

    async def crash(self) -> None:
        # what the device held in memory only (the broker lost its session meanwhile) is gone
        # with the process: nobody can answer it (MQTT: the sender's broker lost it)
        for msg in self.wire.orphans.values():
            if self.kind(msg.topic) == "turn/request":
                with contextlib.suppress(ValueError, AttributeError):
                    self.model.reached.discard(json.loads(msg.payload).get("turn_id"))
        self.wire.orphans.clear()
        self.presence.crashing()
        self.device.crash()
        self.boot = None
        await settle()
        self.crashes += 1
        self.cloud.release()  # requests in flight die with the process
        self.storage_until = -1  # the storage fault ends with the connection that had it
        self.wire.drop()
        self.boot = boot(self.settings, self.clock, self.wire, self.cloud, self.config)
        found = ORACLES["storage_intact"].check(self, 0)
        self._fail([Violation("storage_intact", d) for d in found])
        self.checks["storage_intact"] += 1
        await self.reconnect(True)

    # --- a quiet spell: no fault, no input; what is owed happens -----------------------------
    async def _quiet(self) -> None:
        self._log("quiet")
        before = len(self.wire.sent)
        self.storage_until = self.broker_until = self.cloud_until = self.step
        await self._end_faults()
        self.agents.silent_until = -1
        self.presence.quiet()
        for n in range(QUIET_MAX):  # until nothing is owed (each spell at least a minute)
            self.clock.advance(3.0)
            await self._agents_act()
            await settle()
            app = self.device.app
            due = app.next_due()
            soon = due is not None and (due - self.clock.now()).total_seconds() < 30
            if n >= 20 and not (
                app.tm.active_ids() or self.agents.pending or app.sync.pending() or soon
            ):
                break
        self._fail(check_quiet(self, before))

    def _fail(self, violations: list[Violation]) -> None:
        if violations:
            self.violation = violations
            tail = "\n".join(self.trace[-40:])
            lines = "\n".join(f"  {v.oracle}: {v.detail}" for v in violations)
            raise SimFailure(
                f"seed {self.seed} step {self.step}: oracle violated\n{lines}\n"
                f"replay: {replay_command(self.seed, self.step, self.skip, self.stream)}\n"
                f"trace tail:\n{tail}",
                self,
            )


def _digest(sent: list[Any], kind: Any) -> str:
    if not sent:
        return "-"
    counts = Counter(kind(s.topic) for s in sent)
    raw = json.dumps([(s.topic, s.body) for s in sent], ensure_ascii=False, sort_keys=True)
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    return " ".join(f"{k}×{n}" for k, n in sorted(counts.items())) + f" #{digest}"


def replay_command(
    seed: int, steps: int, skip: frozenset[int] = frozenset(), stream: str = "step"
) -> str:
    """The one line that replays a run, step for step."""
    line = f"python -m tests.devicesim run --seed {seed} --steps {steps}"
    line += f" --stream {stream}" if stream != "step" else ""
    return line + (f" --skip {spans(skip)}" if skip else "")


def spans(steps: frozenset[int]) -> str:
    """`3,5-9,12`: a set of steps as the `--skip` option takes it."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive steps
    for n in sorted(steps):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def parse_spans(text: str) -> frozenset[int]:
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return frozenset(out)


def run_seed(
    seed: int,
    steps: int,
    workdir: Path | None = None,
    skip: frozenset[int] = frozenset(),
    stream: str = "step",
) -> Sim:
    """One seed in a fresh state dir (removed after unless `workdir` is given); the steps in
    `skip` draw their fault and input but do neither (shrinking); `stream` as `Sim` says."""
    own = workdir is None
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # a real file, without the disk's fsync
    path = Path(tempfile.mkdtemp(prefix=f"devicesim-{seed}-", dir=shm)) if own else workdir
    assert path is not None
    sim = Sim(seed, path, stream)
    sim.skip = skip
    try:
        sim.run(steps)
    finally:
        if own:
            shutil.rmtree(path, ignore_errors=True)
    return sim
