"""The shipped Mosquitto ACL, as shipped (issue 30 item 5; SPEC §2, §2.4, §4.5): a real
Mosquitto runs `systemd/mosquitto/a2a.conf` with `systemd/mosquitto/a2a.acl` (the device id
put in) and a password file made here with `mosquitto_passwd`. Role by role, each user
publishes what it must and reads what it must, and nothing else: a publish to a topic it may
not write is not delivered, a subscription to a topic it may not read receives nothing.

The roles' rights below are written from SPEC §2, not read from the ACL: the test is the
contract the file must meet."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest

from a2a_agent import DeviceAgent
from sim.broker import Mosquitto
from sim.cloud import SimCloud
from sim.probe import MqttProbe
from sim.processes import RuntimeProcess
from taskmanager.catalog import load_catalog
from tests.conftest import DEVICE, ROOT, eventually, runtime_config

SHIPPED = Path(__file__).parents[2] / "systemd" / "mosquitto"
CAPABILITIES = sorted(load_catalog().capabilities())
OWN = ("task/command/{c}", "task/cancel/{c}", "task/callback/{c}", "agent/{c}/status")
TOPICS = sorted(
    {
        "turn/request",
        "turn/response",
        "task/callback",
        "pui/event",
        "pui/result",
        "observation",
        "consent/request",
        "consent/result",
        "workflow/request",
        "workflow/event",
        "device/context",
        "memory/forget",
        "memory/forget/result",
        "admin/request",
        "admin/response",
        "runtime/status",
        "runtime/error",
        *(form.format(c=c) for c in CAPABILITIES for form in OWN),
    }
)


def agent(capability: str) -> tuple[set[str], set[str]]:
    """A device agent: its own commands and cancels in; its own callbacks and presence out."""
    writes = {f"task/callback/{capability}", f"agent/{capability}/status"}
    if capability == "mobility":
        writes.add("device/context")  # the base knows the room and the battery
    reads = {f"task/command/{capability}", f"task/cancel/{capability}", "runtime/error"}
    return writes, reads


# user -> (topics it must be able to write, topics it must be able to read), under P
ROLES: dict[str, tuple[set[str], set[str]]] = {
    "voice": ({"turn/request"}, {"turn/response"}),
    "pui": ({"pui/event"}, {"pui/result"}),
    "ui": (
        {"consent/request"},
        {"consent/result", "workflow/event", "runtime/status", "runtime/error"},
    ),
    "perception": ({"observation"}, {"runtime/error"}),
    "app": ({"workflow/request"}, {"workflow/event", "runtime/error"}),
    "admin": (
        {"admin/request", "memory/forget"},
        {
            "admin/response",
            "memory/forget/result",
            "runtime/status",
            "runtime/error",
            "workflow/event",
        },
    ),
    **{f"agent-{c}": agent(c) for c in CAPABILITIES},
}
RUNTIME = "a2a-edge"


def password(user: str) -> str:
    return f"pw-{user}-secret"


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[Mosquitto]:
    """The shipped conf and ACL, with this test's port, files and device id."""
    tool = shutil.which("mosquitto_passwd")
    if tool is None:
        pytest.skip("mosquitto_passwd is not installed (apt-get install mosquitto)")
    passwd = tmp_path / "passwd"
    passwd.touch()
    for user in [RUNTIME, *ROLES]:
        subprocess.run([tool, "-b", str(passwd), user, password(user)], check=True)
    acl = tmp_path / "a2a.acl"
    acl.write_text((SHIPPED / "a2a.acl").read_text().replace("a2a/robot-001/", f"{ROOT}/"))
    conf = (SHIPPED / "a2a.conf").read_text().splitlines()
    # the fixture writes the listener (a free port), allow_anonymous and password_file itself
    assert "listener 1883 127.0.0.1" in conf and "allow_anonymous false" in conf
    assert "password_file /etc/mosquitto/passwd" in conf
    kept = [
        line.replace("/etc/mosquitto/a2a.acl", str(acl))
        for line in conf
        if line and not line.startswith(("#", "listener ", "allow_anonymous ", "password_file "))
    ]
    assert f"acl_file {acl}" in kept
    server = Mosquitto(tmp_path / "broker", password_file=passwd, extra_conf="\n".join(kept) + "\n")
    server.start()
    yield server
    server.kill()


def client(broker: Mosquitto, user: str, topics: list[str]) -> MqttProbe:
    return MqttProbe(
        broker.port,
        topics,
        client_id=f"{user}-{uuid.uuid4().hex[:6]}",
        auth=(user, password(user)),
    )


def p(kind: str) -> str:
    return f"{ROOT}/{kind}"


def seen_by(probe: MqttProbe, marker: str) -> set[str]:
    """The kinds (topics under P) on which `probe` received a payload carrying `marker`."""
    return {
        topic[len(ROOT) + 1 :]
        for topic in [p(kind) for kind in TOPICS]
        if any(isinstance(b, dict) and b.get("marker") == marker for b in probe.messages(topic))
    }


def delivered(probe: MqttProbe, kind: str, end: str) -> bool:
    """`probe` received the end marker `end` on `P/<kind>`."""
    return any(isinstance(b, dict) and b.get("end") == end for b in probe.messages(p(kind)))


def arrived(condition: Callable[[], bool]) -> None:
    """Wait for the end marker; a role denied even that is caught by the set compared next."""
    with contextlib.suppress(AssertionError):
        eventually(condition, timeout_s=5)


def test_every_role_writes_only_its_own_topics(acl_broker: Mosquitto) -> None:
    """On main's README ACL `devices` wrote the shared `P/task/callback`: any agent could
    confirm the mobility agent's cancel (item 2), and no per-capability topic was granted."""
    observer = client(acl_broker, RUNTIME, [p("#")])
    try:
        for user, (writes, _reads) in ROLES.items():
            marker = f"w-{user}"
            sender = client(acl_broker, user, [])
            try:
                for kind in TOPICS:
                    sender.publish(p(kind), {"marker": marker, "kind": kind})
                last = sorted(writes)[0]  # in order behind every other: all have arrived
                sender.publish(p(last), {"marker": marker, "end": marker})
                arrived(partial(delivered, observer, last, marker))
            finally:
                sender.close()
            assert seen_by(observer, marker) == writes, user
    finally:
        observer.close()


def test_every_role_reads_only_its_own_topics(acl_broker: Mosquitto) -> None:
    """On main's README ACL `pui` could not read `P/pui/result`: the button never heard back."""
    readers = {user: client(acl_broker, user, [p(kind) for kind in TOPICS]) for user in ROLES}
    readers["wild"] = client(acl_broker, "pui", [p("#")])  # a wildcard gets no more either
    runtime = client(acl_broker, RUNTIME, [])
    try:
        for kind in TOPICS:
            runtime.publish(p(kind), {"marker": "r", "kind": kind})
        for user, reader in readers.items():
            reads = ROLES["pui" if user == "wild" else user][1]
            last = sorted(reads)[-1]
            runtime.publish(p(last), {"marker": "r", "end": user})
            arrived(partial(delivered, reader, last, user))
            assert seen_by(reader, "r") == reads, user
    finally:
        for reader in readers.values():
            reader.close()
        runtime.close()


def test_an_agent_cannot_confirm_another_capabilitys_cancel_at_the_broker(
    acl_broker: Mosquitto,
) -> None:
    """Item 2's attack at the broker: the display agent publishes the mobility task's
    CANCELLED on the shared topic and on the mobility agent's topic; the runtime's user never
    receives either (at the runtime it would be refused `wrong_capability`:
    tests/e2e/test_callback_topics.py). Its own callback on its own topic goes through."""
    runtime = client(acl_broker, RUNTIME, [p("task/callback"), p("task/callback/+")])
    display = client(acl_broker, "agent-display", [])
    try:
        forged = {"task_id": "wf-c:step_move", "seq": 2, "status": "CANCELLED", "reason": "pui"}
        display.publish(p("task/callback"), forged)
        display.publish(p("task/callback/mobility"), forged)
        own = {"task_id": "wf-s:show", "seq": 1, "status": "RUNNING"}
        display.publish(p("task/callback/display"), own)
        assert runtime.wait_for(p("task/callback/display"), lambda b: True) == own
        assert runtime.messages(p("task/callback")) == []
        assert runtime.messages(p("task/callback/mobility")) == []
    finally:
        display.close()
        runtime.close()


def test_the_acl_names_this_device_only_through_its_root() -> None:
    """Every granted topic is under `a2a/robot-001/` (one sed puts the device id in), and every
    catalog capability has its agent's section."""
    text = (SHIPPED / "a2a.acl").read_text()
    granted = [ln.split()[-1] for ln in text.splitlines() if ln.startswith("topic ")]
    assert granted and all(t.startswith("a2a/robot-001/") for t in granted)
    users = {ln.split()[1] for ln in text.splitlines() if ln.startswith("user ")}
    assert users == {RUNTIME, *ROLES}
    assert DEVICE not in text


def test_under_the_shipped_acl_every_role_hears_back_from_the_real_runtime(
    acl_broker: Mosquitto, cloud: SimCloud, tmp_path: Path
) -> None:
    """The issue's case end to end: the runtime as its own user under the shipped ACL; the
    button and the screen get their feedback (SPEC §2.4), a turn is answered, and a device
    agent (the `a2a_agent` helper, its own user) carries a move out on its own topics."""
    secret = tmp_path / "mqtt-password"
    secret.write_text(password(RUNTIME))
    secret.chmod(0o600)
    mqtt = {"username": RUNTIME, "password_file": str(secret)}
    runtime = RuntimeProcess(runtime_config(tmp_path, acl_broker, cloud.url, mqtt=mqtt), tmp_path)
    ui = client(acl_broker, "ui", [p("consent/result")])
    pui = client(acl_broker, "pui", [p("pui/result")])
    voice = client(acl_broker, "voice", [p("turn/response")])
    app = client(acl_broker, "app", [p("workflow/event")])
    mover = DeviceAgent(
        ROOT,
        client_id="acl-mobility",
        port=acl_broker.port,
        auth=("agent-mobility", password("agent-mobility")),
    )
    mover.handle("mobility", "move_to_room", lambda t: t.completed(arrived_room=t.args["room"]))
    try:
        runtime.start()
        watcher = client(acl_broker, RUNTIME, [p("runtime/status")])
        watcher.wait_for(p("runtime/status"), lambda b: b.get("state") == "online", timeout_s=20)
        watcher.close()
        pui.publish(p("pui/event"), {"event_id": "pui-acl", "kind": "cancel"})
        pressed = pui.wait_for(p("pui/result"), lambda b: b["event_id"] == "pui-acl")
        assert pressed["status"] == "nothing_active"
        ask = {"request_id": "c-acl", "action": "revoke", "scope": "capability:vital_app"}
        ui.publish(p("consent/request"), ask)
        assert ui.wait_for(p("consent/result"), lambda b: b["request_id"] == "c-acl")["ok"]
        voice.publish(p("turn/request"), {"turn_id": "t-acl", "recognized_text": "안녕"})
        assert voice.wait_for(p("turn/response"), lambda b: b["turn_id"] == "t-acl")["status"]
        mover.start()  # its subscriptions are granted (start raises when the broker refuses)
        step = {"step_id": "move", "capability_id": "mobility", "operation_id": "move_to_room"}
        request = {"workflow_id": "wf-acl", "steps": [{**step, "args": {"room": "안방"}}]}
        app.publish(p("workflow/request"), request)
        done = app.wait_for(
            p("workflow/event"),
            lambda b: (
                b["workflow_id"] == "wf-acl"
                and b["status"].startswith("WORKFLOW_")
                and b["status"] != "WORKFLOW_ACCEPTED"
            ),
        )
        assert done["status"] == "WORKFLOW_COMPLETED"
    finally:
        mover.close()
        for each in (ui, pui, voice, app):
            each.close()
        runtime.close()
