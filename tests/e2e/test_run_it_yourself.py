"""The README's *Run it yourself* and docs/cloud-team.md, run as written (issue 35, item 2):
every ```sh block whose first line is `# run: <name>` is taken from the docs' own text (so they
cannot drift) and run in order in one empty directory — the ones marked "a terminal of its own"
in the background — with only the ports chosen here. Then, through the real runtime, broker and
agents:

- with the reference planner (`a2a-edge sim cloud`): the README's turn is answered and its
  workflow completes; the README's workflow request completes;
- with the docs' Node.js planner in its place: a turn, a memory sync and a workflow event pass,
  and everything the real process sent — on MQTT and to the planner — has the keys
  docs/contract.md shows for it (tests/docs/contract_doc.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sim.broker import free_port
from tests.conftest import eventually
from tests.docs.contract_doc import ROOT, drift_of, emitted

README = ROOT / "README.md"
TEAM = ROOT / "docs" / "cloud-team.md"
BLOCK = re.compile(r"^```sh\n# run: (\S+)([^\n]*)\n(.*?)^```", re.M | re.S)
P = "a2a/robot-001"
TERMINAL = ("WORKFLOW_COMPLETED", "WORKFLOW_FAILED", "WORKFLOW_CANCELLED")
PATHS = ("/v1/a2a/turn", "/v1/a2a/memory/sync", "/v1/a2a/workflow/events")
NEEDS = [n for n in ("mosquitto", "mosquitto_pub", "mosquitto_sub") if not shutil.which(n)]


def doc_blocks(path: Path) -> dict[str, tuple[str, bool]]:
    """name -> (code, runs in a terminal of its own)."""
    return {
        name: (code, "a terminal of its own" in head)
        for name, head, code in BLOCK.findall(path.read_text(encoding="utf-8"))
    }


@dataclass
class Stack:
    work: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def run(self, name: str, code: str, background: bool) -> subprocess.CompletedProcess[str]:
        if background:
            with (self.work / f"{name}.out").open("wb") as out:
                self.procs[name] = subprocess.Popen(
                    ["bash", "-c", f"exec {code.strip()}" if "\n" not in code.strip() else code],
                    cwd=self.work,
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own group: stopped with what it started
                )
            return subprocess.CompletedProcess([name], 0, "", "")
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 0, f"# run: {name} exited {done.returncode}: {done.stderr}"
        return done

    def output(self, name: str) -> str:
        return (self.work / f"{name}.out").read_text(encoding="utf-8", errors="replace")

    def alive(self, name: str) -> None:
        code = self.procs[name].poll()
        assert code is None, f"# run: {name} ended ({code}):\n{self.output(name)[-3000:]}"

    def heard(self) -> list[tuple[str, Any]]:
        """What the README's watcher printed: (topic, payload) per line."""
        out = []
        for line in self.output("watch").splitlines():
            topic, _, payload = line.partition(" ")
            try:
                out.append((topic, json.loads(payload)))
            except json.JSONDecodeError:
                continue
        return out

    def on(self, kind: str) -> list[Any]:
        return [body for topic, body in self.heard() if topic == f"{P}/{kind}"]

    def stop(self) -> None:
        for proc in reversed(self.procs.values()):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # the group this test started
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    if NEEDS:
        pytest.skip(
            f"not installed: {', '.join(NEEDS)} (apt-get install mosquitto mosquitto-clients)"
        )
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PORT": str(free_port()),
        "PLANNER_PORT": str(free_port()),
        "PYTHONPATH": str(ROOT),  # `a2a-edge` runs this tree, as the editable install does
    }
    env.pop("NOTIFY_SOCKET", None)  # outside systemd, as the README says
    started = Stack(tmp_path, env)
    yield started
    started.stop()


def bring_up(stack: Stack, planner: tuple[str, bool]) -> None:
    """The README's blocks up to `watch`, with `planner` as its planner block; returns when
    the watcher is subscribed (it printed the retained runtime/status)."""
    blocks = doc_blocks(README)
    assert list(blocks) == [
        "files", "broker", "planner", "devices", "runtime", "ready", "watch", "turn", "workflow",
    ]  # fmt: skip
    for name in ("files", "broker", "planner", "devices", "runtime", "ready", "watch"):
        code, background = planner if name == "planner" else blocks[name]
        stack.run(name, code, background)  # no wait of ours: `ready` is the README's own
    for name in ("broker", "planner", "devices", "runtime"):
        stack.alive(name)
    eventually(lambda: stack.on("runtime/status"), 15)


def ended(stack: Stack, workflow_id: str) -> str:
    def status() -> str | None:
        for body in stack.on("workflow/event"):
            if body.get("workflow_id") == workflow_id and body.get("status") in TERMINAL:
                return str(body["status"])
        return None

    return str(eventually(status, 30))


def test_the_readme_recipe_runs_a_turn_and_a_workflow(stack: Stack) -> None:
    blocks = doc_blocks(README)
    bring_up(stack, blocks["planner"])
    assert "a2a-edge sim cloud" in blocks["planner"][0]
    stack.run("turn", *blocks["turn"])
    answer = eventually(
        lambda: [b for b in stack.on("turn/response") if b["turn_id"] == "turn-0001"], 15
    )[0]
    assert answer["status"] == "ok" and answer["route_family"] == "ODL", answer
    [workflow_id] = answer["workflow_ids"]
    assert ended(stack, workflow_id) == "WORKFLOW_COMPLETED"
    stack.run("workflow", *blocks["workflow"])
    assert ended(stack, "wf-hello") == "WORKFLOW_COMPLETED"
    commands = stack.on("task/command/mobility")
    assert [c["args"] for c in commands if c["workflow_id"] == "wf-hello"] == [{"room": "현관"}]


def test_status_wait_ready_says_when_nothing_is_ready(stack: Stack) -> None:
    stack.run("files", *doc_blocks(README)["files"])
    begun = time.monotonic()
    done = subprocess.run(
        ["a2a-edge", "status", "--config", "config.toml", "--wait-ready", "1"],
        cwd=stack.work,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done
    assert time.monotonic() - begun >= 1.0  # it waited, then said so
    assert "state.db does not exist" in done.stderr or "not READY" in done.stderr


def planner_requests(stack: Stack) -> list[dict[str, Any]]:
    out = []
    for line in stack.output("planner").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def to_planner(stack: Stack, path: str) -> list[Any]:
    return [r["body"] for r in planner_requests(stack) if r["path"] == path]


def writes(stack: Stack, kind: str) -> list[Any]:
    return [
        w["payload"]
        for body in to_planner(stack, "/v1/a2a/memory/sync")
        for w in body["writes"]
        if w["kind"] == kind
    ]


def pub(stack: Stack, kind: str, body: dict[str, Any]) -> None:
    subprocess.run(
        ["mosquitto_pub", "-p", stack.env["PORT"], "-q", "1", "-t", f"{P}/{kind}",
         "-m", json.dumps(body, ensure_ascii=False)],
        check=True,
        timeout=30,
    )  # fmt: skip


def test_the_cloud_teams_planner_passes_a_turn_a_sync_and_a_workflow_event(
    stack: Stack,
) -> None:
    if not shutil.which("node"):
        pytest.skip("no node (Node.js 18+): the cloud team's planner is not run")
    team = doc_blocks(TEAM)
    assert list(team) == ["planner"] and "docs/examples/planner.mjs" in team["planner"][0]
    planner_code = team["planner"][0].replace("docs/examples/", f"{ROOT}/docs/examples/")
    bring_up(stack, (planner_code, team["planner"][1]))
    readme = doc_blocks(README)
    stack.run("turn", *readme["turn"])
    answer = eventually(lambda: stack.on("turn/response"), 15)[0]
    assert answer["status"] == "ok" and answer["route_family"] == "ODL", answer
    [workflow_id] = answer["workflow_ids"]
    assert workflow_id.startswith("wf-")  # made by the planner
    assert ended(stack, workflow_id) == "WORKFLOW_COMPLETED"
    # a turn, a sync and a workflow event reached the Node.js planner, and were taken
    [turn] = to_planner(stack, "/v1/a2a/turn")
    assert turn["recognized_text"] == "안방으로 가서 청정해줘"
    pairs = eventually(lambda: writes(stack, "short_term_pair"), 15)
    assert pairs[0]["turn_id"] == "turn-0001" and pairs[0]["workflow_id"] == workflow_id

    def reported() -> list[str]:  # a batch of terminal events (contract.md §3.3) counts each
        bodies = to_planner(stack, "/v1/a2a/workflow/events")
        return [e["event"]["status"] for b in bodies for e in b.get("batch", [b])]

    eventually(lambda: "WORKFLOW_COMPLETED" in reported(), 15)
    assert reported().count("COMPLETED") == 2  # each step's end, then the workflow's

    def sync_status() -> dict[str, Any]:
        done = subprocess.run(
            ["a2a-edge", "sync", "status", "--config", "config.toml", "--json"],
            cwd=stack.work, env=stack.env, capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return dict(json.loads(done.stdout))

    sync = eventually(lambda: (s := sync_status())["pending"] == 0 and s, 20)
    assert sync["dead_letters"] == 0, sync  # the planner took every write it was sent
    print(sync)

    exercise_the_rest(stack)
    compare_with_the_contract(stack)


def exercise_the_rest(stack: Stack) -> None:
    """What else the contract shows an example of, so that the real process sends it once."""
    long_play = {
        "workflow_id": "wf-long",
        "steps": [{"step_id": "play", "capability_id": "content",
                   "operation_id": "play_guidance", "args": {"minutes": 5}}],
    }  # fmt: skip
    pub(stack, "workflow/request", long_play)
    eventually(
        lambda: [b for b in stack.on("workflow/event")
                 if b.get("task_id") == "wf-long:play" and b["status"] == "RUNNING"], 20
    )  # fmt: skip
    pub(stack, "pui/event", {"event_id": "pui-1", "kind": "cancel"})
    eventually(lambda: stack.on("pui/result"), 15)
    eventually(lambda: stack.on("task/cancel/content"), 15)
    grant = {"request_id": "c-1", "action": "grant", "scope": "capability:vital_app", "ttl_s": 600}
    pub(stack, "consent/request", grant)
    eventually(lambda: stack.on("consent/result"), 15)
    pub(stack, "memory/forget", {"request_id": "f-1", "scope": "session", "id": "nope"})
    eventually(lambda: stack.on("memory/forget/result"), 15)
    pub(stack, "admin/request", {"request_id": "a-1", "command": "sync.replay", "args": {}})
    eventually(lambda: stack.on("admin/response"), 15)
    pub(stack, "task/callback/mobility", {"task_id": "wf-none:move", "seq": 1, "status": "RUNNING"})
    eventually(lambda: stack.on("runtime/error"), 15)
    eventually(lambda: writes(stack, "consent") and writes(stack, "memory_deletion"), 20)


def compare_with_the_contract(stack: Stack) -> None:
    """Each example marked `emitted` against the last such message the run sent (MQTT), the
    first request the planner got (HTTP), the first write of its kind."""
    drift: list[str] = []
    mqtt = emitted("mqtt:")
    assert len(mqtt) >= 10, sorted(mqtt)
    for target, (example, check) in mqtt.items():
        kind = target.removeprefix("mqtt:")
        sent = [b for t, b in stack.heard() if t == f"{P}/{kind}" or t.startswith(f"{P}/{kind}/")]
        assert sent, f"the run sent nothing on {kind} (contract.md line {example.line})"
        drift += [f"{kind} (line {example.line}) {d}" for d in drift_of(example, check, sent[-1])]
    http = emitted("http:")
    assert set(http) == {f"http:{p}" for p in PATHS}
    for target, (example, check) in http.items():
        path = target.removeprefix("http:")
        # a batch of terminal reports (contract.md §3.3, the linger lets them pile up): each
        # entry is the single form's body without `device_id` and `decision_requested` (false)
        bodies = [
            {**e, "device_id": b["device_id"], "decision_requested": False} if "batch" in b else e
            for b in to_planner(stack, path)
            for e in b.get("batch", [b])
        ]
        assert bodies, path
        drift += [f"{path} (line {example.line}) {d}" for d in drift_of(example, check, bodies[0])]
    kinds = emitted("write:")
    assert len(kinds) >= 3, sorted(kinds)
    for target, (example, check) in kinds.items():
        kind = target.removeprefix("write:")
        payloads = writes(stack, kind)
        assert payloads, f"no {kind} write was sent"
        drift += [
            f"write {kind} (line {example.line}) {d}" for d in drift_of(example, check, payloads[0])
        ]
    assert not drift, "docs/contract.md and the real process disagree:\n" + "\n".join(drift)
