"""docs/device-agents.md runs: every block marked `# doc-test: <name>` is executed in order
against the real runtime and Mosquitto (the shell ones with mosquitto_pub/mosquitto_sub,
`$PORT` and `$P` set), and what the guide says each does is checked here, so the guide cannot
drift from the runtime. Where the guide describes SPEC changes being built in parallel
(`ack_deadline`, `ref`, `task_terminal`), only what the runtime does today is required."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from a2a_common.clock import iso
from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from tests.a2a_agent.workflows import one_step
from tests.conftest import ROOT, RuntimeFactory, eventually, runtime_config, wait_online

DOC = Path(__file__).resolve().parents[2] / "docs" / "device-agents.md"
BLOCK = re.compile(r"^```(sh|python)\n# doc-test: (\S+)\n(.*?)^```", re.M | re.S)
EVENTS = f"{ROOT}/workflow/event"
ERRORS = f"{ROOT}/runtime/error"
CALLBACK_TOPIC = f"{ROOT}/task/callback/mobility"  # the agent's own (SPEC 2)
CLIENTS = shutil.which("mosquitto_pub") and shutil.which("mosquitto_sub")
NO_CLIENTS = "no mosquitto_pub/mosquitto_sub (apt-get install mosquitto-clients): guide not run"


def doc_blocks(language: str) -> list[tuple[str, str]]:
    return [(name, code) for lang, name, code in BLOCK.findall(DOC.read_text()) if lang == language]


@dataclass
class Ran:
    probe: MqttProbe
    cloud: SimCloud
    work: Path
    stdout: str


def event(ran: Ran, task_id: str, status: str) -> Any:
    return ran.probe.wait_for(
        EVENTS, lambda b: b.get("task_id") == task_id and b.get("status") == status
    )


def workflow_ended(probe: MqttProbe, workflow_id: str, status: str) -> Any:
    return probe.wait_for(
        EVENTS, lambda b: b.get("workflow_id") == workflow_id and b.get("status") == status
    )


def refusal(ran: Ran, error: str, task_id: str | None = None, seq: int | None = None) -> Any:
    """The refusal `error` of a callback, with the `ref` of SPEC §2.4."""
    body = ran.probe.wait_for(
        ERRORS, lambda b: b.get("error") == error and b.get("topic") == CALLBACK_TOPIC
    )
    if task_id is not None:
        assert body["ref"].get("task_id") == task_id and body["ref"].get("seq") == seq
    return body


def check_command(ran: Ran) -> None:
    command = json.loads(ran.stdout)
    assert command["task_id"] == "wf-doc:move" and command["attempt"] == 1
    assert command["args"] == {"room": "안방"} and command["capability_id"] == "mobility"
    issued, deadline = (datetime.fromisoformat(command[k]) for k in ("issued_at", "deadline"))
    assert issued < deadline
    assert issued < datetime.fromisoformat(command["ack_deadline"]) <= deadline  # SPEC §2.1


def check_completed(ran: Ran) -> None:
    workflow_ended(ran.probe, "wf-doc", "WORKFLOW_COMPLETED")
    statuses = [e["status"] for e in ran.probe.messages(EVENTS) if e["task_id"] == "wf-doc:move"]
    assert statuses.count("PROGRESS") == 1  # the repeated seq 2 was applied once
    reports = eventually(
        lambda: [
            r["body"]["event"]
            for r in ran.cloud.requests("/v1/a2a/workflow/events")
            if r["body"]["event"].get("task_id") == "wf-doc:move"
            and r["body"]["event"]["status"] == "COMPLETED"
        ]
    )
    assert reports[0]["evidence"] == {"arrived_room": "안방"}  # wheel_odometry_m dropped


def check_ack_timeout(ran: Ran) -> None:
    assert event(ran, "wf-slow:move", "TIMEOUT")["reason"] == "ack_timeout"
    workflow_ended(ran.probe, "wf-slow", "WORKFLOW_FAILED")
    (topic1, command), (topic2, cancel) = (
        line.split(" ", 1) for line in ran.stdout.strip().splitlines()
    )
    assert topic1 == f"{ROOT}/task/command/mobility" and topic2 == f"{ROOT}/task/cancel/mobility"
    assert json.loads(command)["task_id"] == "wf-slow:move"
    assert json.loads(cancel) == {"task_id": "wf-slow:move", "workflow_id": "wf-slow",
                                  "reason": "timeout"}  # fmt: skip


def check_cancel(ran: Ran) -> None:
    assert workflow_ended(ran.probe, "wf-stop", "WORKFLOW_CANCELLED")["reason"] == "pui"
    cancel = json.loads((ran.work / "cancel.json").read_text())
    assert cancel == {"task_id": "wf-stop:move", "workflow_id": "wf-stop", "reason": "pui"}


CHECKS: dict[str, Callable[[Ran], Any]] = {
    "subscribe": lambda ran: None,
    "push": lambda ran: event(ran, "wf-doc:move", "DISPATCHED"),
    "command": check_command,
    "running": lambda ran: event(ran, "wf-doc:move", "RUNNING"),
    "progress": lambda ran: event(ran, "wf-doc:move", "PROGRESS"),
    "completed": check_completed,
    "late": lambda ran: refusal(ran, "task_terminal", "wf-doc:move", 4),
    "ack-timeout": check_ack_timeout,
    "cancel": check_cancel,
    "unknown-task": lambda ran: refusal(ran, "unknown_task", "wf-nowhere:move", 1),
    "invalid-field": lambda ran: refusal(ran, "invalid_field", "wf-doc:move", 5),
    "missing-field": lambda ran: refusal(ran, "missing_field"),
    "payload-too-large": lambda ran: refusal(ran, "payload_too_large"),
    "invalid-json": lambda ran: refusal(ran, "invalid_json"),
}


@pytest.mark.skipif(not CLIENTS, reason=NO_CLIENTS)
def test_the_guides_shell_examples_do_what_it_says(
    tmp_path: Path,
    broker: Mosquitto,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    runtime_factory()
    blocks = doc_blocks("sh")
    assert [name for name, _ in blocks] == list(CHECKS)  # every runnable block is checked
    env = {**os.environ, "PORT": str(broker.port), "P": ROOT}
    for name, code in blocks:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, f"doc-test {name}: {done.stderr}"
        CHECKS[name](Ran(probe, cloud, tmp_path, done.stdout))
    # the late FAILED (seq 4) changed nothing: wf-doc:move stays COMPLETED
    late = [e for e in probe.messages(EVENTS) if e["task_id"] == "wf-doc:move"]
    assert late[-1]["status"] in ("COMPLETED", "WORKFLOW_COMPLETED")
    assert not [e for e in late if e["status"] == "FAILED"]


def test_the_guides_python_agent_serves_and_stops(
    tmp_path: Path, broker: Mosquitto, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime_factory()
    [(_name, code)] = doc_blocks("python")
    script = tmp_path / "agent.py"
    script.write_text(code)
    env = {**os.environ, "PORT": str(broker.port), "P": ROOT}
    agent = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    reader = threading.Thread(target=collect, args=(agent, lines), daemon=True)
    reader.start()
    try:
        eventually(lambda: "serving\n" in lines)
        probe.publish(
            f"{ROOT}/workflow/request",
            one_step("wf-py", "move", "mobility.move_to_room", room="안방"),
        )
        workflow_ended(probe, "wf-py", "WORKFLOW_COMPLETED")
        callbacks = [b for b in probe.messages(CALLBACK_TOPIC) if b["task_id"] == "wf-py:move"]
        assert [b["status"] for b in callbacks] == ["RUNNING"] + ["PROGRESS"] * 3 + ["COMPLETED"]
        assert callbacks[-1]["evidence"] == {"arrived_room": "안방"}
        probe.publish(
            f"{ROOT}/workflow/request",
            one_step("wf-py-2", "move", "mobility.move_to_room", room="주방"),
        )
        probe.wait_for(
            EVENTS, lambda b: b.get("task_id") == "wf-py-2:move" and b["status"] == "RUNNING"
        )
        probe.publish(f"{ROOT}/pui/event", {"event_id": "pui-py", "kind": "cancel"})
        workflow_ended(probe, "wf-py-2", "WORKFLOW_CANCELLED")
        eventually(lambda: "cancelled: pui\n" in lines)
        probe.wait_for(
            CALLBACK_TOPIC,
            lambda b: b["task_id"] == "wf-py-2:move" and b["status"] == "CANCELLED",
        )
    finally:
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(10) == 0


def collect(agent: subprocess.Popen[str], lines: list[str]) -> None:
    assert agent.stdout is not None
    for line in agent.stdout:
        lines.append(line)


# --- section 10 and the install lines (issue 35 items 4, 5; "Done when" (b)) -----------------

OWN = re.compile(r"^```(?:sh|python)\n# own-capability: (\S+)\n(.*?)^```", re.M | re.S)
INSTALL = re.compile(r"^```sh\n# install: (\S+)\n(.*?)^```", re.M | re.S)
ARM_CALLBACKS = f"{ROOT}/task/callback/arm"
REPO = DOC.parents[1]


def bash(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{code}\n{done.stdout}\n{done.stderr}"
    return done


def started(args: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as out:
        return subprocess.Popen(
            args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )


def stopped(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.skipif(not CLIENTS, reason=NO_CLIENTS)
def test_a_team_adds_a_capability_beside_sim_devices_and_the_pui_cancels_it(
    tmp_path: Path, broker: Mosquitto, cloud: SimCloud, probe: MqttProbe
) -> None:
    """Section 10 as a device team runs it: the catalog file added by config, `sim devices
    --exclude arm`, the team's own agent; a workflow on the arm runs on that agent alone (on
    main the simulator, subscribed to every capability, answered FAILED unsupported_operation
    within a millisecond) and the PUI press cancels it; the trace names who answered."""
    blocks = dict(OWN.findall(DOC.read_text()))
    assert list(blocks) == ["catalog", "sim", "agent", "push", "press", "trace"]
    config = runtime_config(tmp_path, broker, cloud.url)
    work = tmp_path / "team"
    work.mkdir()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # a2a-edge
    env = {**os.environ, "PORT": str(broker.port), "P": ROOT, "CONFIG": str(config), "PATH": path}
    checked = bash(blocks["catalog"], work, env)
    assert checked.stdout.strip() == f"catalog: arm from {work / 'arm.json'} (safe_stop halt)"
    runtime = RuntimeProcess(config, tmp_path)
    since = iso(datetime.now(UTC) - timedelta(seconds=1))
    runtime.start()
    (work / "agent.py").write_text(blocks["agent"])
    sim = started(["bash", "-c", blocks["sim"]], work, env, work / "sim.log")
    agent = started([sys.executable, "agent.py"], work, env, work / "agent.log")
    try:
        wait_online(broker.port, since)
        probe.wait_for(f"{ROOT}/device/context")  # the simulator is connected and subscribed
        eventually(lambda: "arm serving" in (work / "agent.log").read_text())
        bash(blocks["push"], work, env)
        event(Ran(probe, cloud, work, ""), "wf-arm:pick", "RUNNING")
        bash(blocks["press"], work, env)
        assert workflow_ended(probe, "wf-arm", "WORKFLOW_CANCELLED")["reason"] == "pui"
        probe.wait_for(
            ARM_CALLBACKS, lambda b: b["task_id"] == "wf-arm:pick" and b["status"] == "CANCELLED"
        )
        eventually(lambda: "halted: pui" in (work / "agent.log").read_text())
        callbacks = [b for b in probe.messages(ARM_CALLBACKS) if b["task_id"] == "wf-arm:pick"]
        assert {b.get("agent") for b in callbacks} == {"arm-agent"}  # the simulator never spoke
        assert "FAILED" not in [b["status"] for b in callbacks]
        trace = bash(blocks["trace"], work, env).stdout
        assert 'via="task/callback/arm" agent="arm-agent"' in trace
        [confirmed] = [line for line in trace.splitlines() if "cancel_confirmed" in line]
        assert 'agent="arm-agent"' in confirmed  # who confirmed the stop
        assert "sim-devices" not in trace and "unsupported_operation" not in trace
        # the simulator still serves the rest of the robot, and says so in the trace
        probe.publish(
            f"{ROOT}/workflow/request", one_step("wf-say", "say", "speaker.say", text="안녕")
        )
        workflow_ended(probe, "wf-say", "WORKFLOW_COMPLETED")
        said = bash(f'a2a-edge workflows trace wf-say --config "{config}" --json', work, env)
        rows = json.loads(said.stdout)["timeline"]
        assert {"agent": "sim-devices", "via": "task/callback/speaker"}.items() <= next(
            r for r in rows if r.get("status") == "COMPLETED"
        ).items()
    finally:
        stopped(agent)
        stopped(sim)
        runtime.close()
    assert agent.returncode == 0, (work / "agent.log").read_text()


def test_the_guides_install_lines_build_and_install_the_helper(tmp_path: Path) -> None:
    """Section 8's install lines, as written, in a clone (a copy of the sources) and a fresh
    venv: on main they said `pip install a2a-edge`, which no package index has. Offline here:
    pip takes no index, no dependencies and no build isolation from the environment (setuptools
    and the dependencies come from this venv through a .pth line), the lines are the guide's."""
    blocks = dict(INSTALL.findall(DOC.read_text()))
    assert list(blocks) == ["build", "wheel"]
    clone = tmp_path / "a2a-edge"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, clone / name)
    packages = {p.split(".")[0] for p in tomllib.loads((REPO / "pyproject.toml").read_text())[
        "tool"]["setuptools"]["packages"]}  # fmt: skip
    for package in packages:
        shutil.copytree(
            REPO / package, clone / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    (site_dir,) = (venv / "lib").glob("python3*/site-packages")
    (site_dir / "_test_deps.pth").write_text(site.getsitepackages()[0] + "\n")
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # the installed copy only
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",  # python3: the fresh venv's
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    bash(blocks["build"], clone, env)
    assert list((clone / "dist").glob("a2a_edge-*-py3-none-any.whl"))
    bash(blocks["wheel"], clone, env)
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import a2a_agent; print(a2a_agent.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(site_dir)  # the installed copy
