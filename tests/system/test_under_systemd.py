"""Every promise systemd/a2a-edge.service makes, under a real systemd 252 as PID 1.

The tests share one booted container (tests/system/conftest.py) and run in this order: the
install first, then each test leaves the service active with the test bed's config."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from a2a_common.db import Database
from a2a_common.sqlite import migrate
from edge.store.schema import MIGRATIONS
from tests.conftest import eventually
from tests.system.conftest import ROOT, System, missing

if missing():
    pytest.skip(
        f"system tests need root, systemd-nspawn and debootstrap ({missing()})",
        allow_module_level=True,
    )
pytestmark = [pytest.mark.system, pytest.mark.xdist_group("system")]  # one booted container
VENV = "/opt/a2a-edge/.venv/bin"
STATE = "/var/lib/a2a-edge"
AS_USER = ["setpriv", "--reuid=a2a-edge", "--regid=a2a-edge", "--clear-groups"]
DROP_IN = "etc/systemd/system/a2a-edge.service.d/test.conf"


def active(system: System, restarts: int | None = None) -> dict[str, str]:
    """Until the service is active/running (after `restarts` restarts, when given)."""

    def check() -> dict[str, str] | None:
        props = system.show("ActiveState", "SubState", "MainPID", "NRestarts", "StatusText")
        if props["ActiveState"] != "active" or props["SubState"] != "running":
            return None
        if restarts is not None and int(props["NRestarts"]) < restarts:
            return None
        return props if "broker connected" in props["StatusText"] else None

    return eventually(check, 30)  # type: ignore[no-any-return]


def stays_failed(system: System, status: str) -> dict[str, str]:
    """Failed with this exit status, and not started again past RestartSec (2 s)."""
    props = eventually(
        lambda: (
            (p := system.show("ActiveState", "ExecMainStatus", "NRestarts"))["ActiveState"]
            == "failed"
            and p
        ),
        30,
    )
    assert props["ExecMainStatus"] == status
    # a restart to come would show as activating/auto-restart during RestartSec, never failed;
    # watch a little while anyway
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        now = system.show("ActiveState", "NRestarts")
        assert (now["ActiveState"], now["NRestarts"]) == ("failed", props["NRestarts"]), now
        time.sleep(0.25)
    return props  # type: ignore[no-any-return]


def as_the_service(system: System, pid: str) -> list[str]:
    """Into the running service's mount namespace (its sandbox), as its user (bookworm's
    nsenter takes numbers only)."""
    user = system.machine.ok(["getent", "passwd", "a2a-edge"]).split(":")
    return ["nsenter", f"--target={pid}", "--mount", f"--setuid={user[2]}", f"--setgid={user[3]}"]


def asked_cloud(system: System, text: str) -> bool:
    """The sim cloud on the host got a turn with these words from the container."""
    turns = system.cloud.requests("/v1/a2a/turn")
    return any(text in json.dumps(r["body"], ensure_ascii=False) for r in turns)


def mode_owner(system: System, path: str) -> str:
    return system.machine.ok(["stat", "-c", "%a %U:%G", path]).strip()


def restart_clean(system: System) -> dict[str, str]:
    system.config()
    system.machine.run(["systemctl", "reset-failed", "a2a-edge"])
    system.machine.ok(["systemctl", "restart", "a2a-edge"])
    return active(system)


def test_installed_the_readme_way_then_started(system: System) -> None:
    first, started = system.installed, system.started
    assert first is not None
    assert first.returncode == 0, first.stderr
    assert "installed /etc/a2a-edge/config.toml" in first.stdout
    assert started is not None
    assert started.returncode == 0, started.stderr
    user = system.machine.ok(["getent", "passwd", "a2a-edge"]).strip().split(":")
    assert int(user[2]) < 1000 and user[6] in ("/usr/sbin/nologin", "/sbin/nologin")
    assert mode_owner(system, "/etc/a2a-edge") == "750 root:a2a-edge"
    assert mode_owner(system, "/etc/a2a-edge/config.toml") == "640 root:a2a-edge"
    assert mode_owner(system, STATE) == "700 a2a-edge:a2a-edge"
    assert mode_owner(system, f"{STATE}/backups") == "700 a2a-edge:a2a-edge"
    props = active(system)
    assert "cloud reachable" in props["StatusText"], props
    assert mode_owner(system, f"{STATE}/state.db") == "600 a2a-edge:a2a-edge"
    assert mode_owner(system, f"{STATE}/lock") == "600 a2a-edge:a2a-edge"
    lock = (system.machine.root / STATE.lstrip("/") / "lock").read_text()
    assert lock.split()[0] == props["MainPID"]  # ours: the service's pid is in its lock
    assert system.show("UnitFileState")["UnitFileState"] == "enabled"


def test_ready_status_and_a_turn_over_mqtt(system: System) -> None:
    props = system.show("Type", "NotifyAccess", "StatusText", "WatchdogUSec")
    assert (props["Type"], props["NotifyAccess"], props["WatchdogUSec"]) == (
        "notify",
        "main",
        "30s",
    )
    probe = system.probe()
    try:
        status = probe.wait_for(f"{ROOT}/runtime/status", lambda b: b.get("state") == "online")
        assert status["version"]
        answer = probe.turn("t-sys-1", "거실 불 켜줘")
        assert answer["status"] == "ok", answer
    finally:
        probe.close()
    assert asked_cloud(system, "거실 불 켜줘")


def test_journal_priorities_and_no_user_words(system: System) -> None:
    probe = system.probe()
    try:
        probe.publish(f"{ROOT}/turn/request", "{not json 비밀번호 1234".encode())
        probe.wait_for(f"{ROOT}/runtime/error", timeout_s=10)
        probe.turn("t-sys-2", "제 비밀번호는 오렌지예요")
    finally:
        probe.close()
    eventually(lambda: "invalid_json" in system.journal("-p", "warning"), 10)
    warnings = system.journal("-p", "warning").splitlines()
    assert warnings and all("started:" not in line for line in warnings), warnings
    everything = system.journal("-p", "debug")
    assert "started: device robot-sys" in everything  # an INFO line, not in -p warning
    assert not re.search(r"^<\d>", everything, re.M)  # the prefix became the priority
    assert "오렌지" not in everything and "비밀번호" not in everything  # INFO: no user words
    entries = [json.loads(line) for line in system.journal("-o", "json").splitlines()]
    ours = [e for e in entries if isinstance(e.get("MESSAGE"), str) and e.get("_PID") != "1"]

    def priorities(start: str) -> set[str]:
        return {e["PRIORITY"] for e in ours if e["MESSAGE"].startswith(start)}

    assert priorities("edge.app.refusals: refused message") == {"4"}  # warning
    assert priorities("edge.runtime.lifecycle: started: ") == {"6"}  # info


def test_reload_applies_before_it_returns_and_refuses_a_bad_file(system: System) -> None:
    pid = active(system)["MainPID"]
    assert system.machine.run(["test", "-e", "/bin/kill"]).returncode == 1  # no procps here
    system.config(log={"level": "DEBUG"})
    done = system.machine.run(["systemctl", "reload", "a2a-edge"], timeout=40)
    assert done.returncode == 0, done.stderr + system.journal("-n", "20")
    mark = json.loads((system.machine.root / STATE.lstrip("/") / "reloaded").read_text())
    assert mark["applied"] is True and str(mark["pid"]) == pid  # applied when reload returned
    eventually(lambda: "log level DEBUG" in system.journal("--grep", "reloaded: log level"), 10)
    bad = system.machine.root / "etc/a2a-edge/config.toml"
    bad.write_text(bad.read_text() + "\n[log]\nlevel = 7\n")
    refused = system.machine.run(["systemctl", "reload", "a2a-edge"], timeout=40)
    assert refused.returncode != 0
    assert "ExecReload" in system.machine.run(["systemctl", "status", "a2a-edge"]).stdout
    props = active(system)
    assert props["MainPID"] == pid and props["NRestarts"] == "0"  # still the same, running
    # a key only a restart applies: the rest applied, the key named, and `systemctl reload`
    # fails so that the operator hears it (`a2a-edge reload` exits 4: c1ee6fe, docs/cli.md)
    system.config(mqtt={"port": 1})
    try:
        waits = system.machine.run(["systemctl", "reload", "a2a-edge"], timeout=40)
        assert waits.returncode != 0, waits.stdout
        mark = json.loads((system.machine.root / STATE.lstrip("/") / "reloaded").read_text())
        assert mark["applied"] is True and mark["needs_restart"] == ["mqtt.port"], mark
        said = "reload: mqtt.port changed in the file, applied only at a restart"
        eventually(lambda: said in system.journal("-p", "warning"), 10)
        assert "status=4" in system.machine.run(["systemctl", "status", "a2a-edge"]).stdout
        props = active(system)  # the same process, on the port it started with
        assert props["MainPID"] == pid and props["NRestarts"] == "0"
    finally:
        system.config()  # the next tests start from the test bed's config
    system.machine.ok(["systemctl", "reload", "a2a-edge"], timeout=40)


def test_kill_9_restarts_and_loses_nothing(system: System) -> None:
    before = active(system)
    probe = system.probe()
    try:
        assert probe.turn("t-sys-k0", "안녕")["status"] == "ok"  # answered just before the kill
        system.machine.ok(["systemctl", "kill", "--signal=KILL", "a2a-edge"])
        probe.publish(f"{ROOT}/turn/request", {"turn_id": "t-sys-k", "recognized_text": "멈춰"})
        after = active(system, restarts=int(before["NRestarts"]) + 1)
        assert after["MainPID"] != before["MainPID"]
        answer = probe.wait_for(
            f"{ROOT}/turn/response", lambda b: b.get("turn_id") == "t-sys-k", timeout_s=30
        )
        assert answer["status"] in ("ok", "offline")  # queued by the broker while it was down
    finally:
        probe.close()
    db = sqlite3.connect(f"file:{system.machine.root}{STATE}/state.db?mode=ro", uri=True)
    turns = {row[0] for row in db.execute("SELECT turn_id FROM pairs")}
    db.close()
    assert {"t-sys-k0", "t-sys-k"} <= turns


def test_the_watchdog_kills_and_restarts_a_wedged_loop(system: System) -> None:
    drop_in = system.machine.root / DROP_IN
    drop_in.parent.mkdir(exist_ok=True)
    # the debug hook wedges the loop 3 s: longer than this WatchdogSec
    drop_in.write_text("[Service]\nWatchdogSec=2\nEnvironment=A2A_DEBUG_HOOKS=1\n")
    try:
        system.machine.ok(["systemctl", "daemon-reload"])
        system.machine.ok(["systemctl", "restart", "a2a-edge"])
        before = active(system)
        system.machine.ok(["systemctl", "kill", "--kill-whom=main", "--signal=USR2", "a2a-edge"])
        active(system, restarts=int(before["NRestarts"]) + 1)
        said = system.machine.ok(["journalctl", "--no-pager", "-o", "cat", "--grep", "watchdog"])
        assert "a2a-edge.service: Watchdog timeout" in said, said
        assert "a2a-edge.service: Failed with result 'watchdog'" in said, said
    finally:
        drop_in.unlink()
        system.machine.ok(["systemctl", "daemon-reload"])
        restart_clean(system)


def test_bad_config_exit_2_and_unusable_state_exit_3_are_not_restarted(system: System) -> None:
    conf = system.machine.root / "etc/a2a-edge/config.toml"
    conf.write_text(conf.read_text() + "\nno_such_key = 1\n")
    system.machine.run(["systemctl", "restart", "a2a-edge"])
    stays_failed(system, "2")
    assert "no_such_key" in system.journal("-p", "err", "-n", "5")
    restart_clean(system)
    system.machine.ok(["systemctl", "stop", "a2a-edge"])
    db = system.machine.root / STATE.lstrip("/") / "state.db"
    aside = db.with_name("state.db.aside")
    db.rename(aside)
    db.mkdir()  # state.db a directory: the start-up check refuses it
    try:
        system.machine.run(["systemctl", "start", "a2a-edge"])
        stays_failed(system, "3")
        assert "a2a-edge: state DB: " in system.journal("-p", "err", "-n", "5")
    finally:
        db.rmdir()
        aside.rename(db)
    restart_clean(system)


def test_stop_is_bounded_with_a_turn_in_flight(system: System) -> None:
    active(system)
    system.cloud.set_faults(latency_s=5.0, path="/v1/a2a/turn")
    warned = len(system.journal("-p", "warning").splitlines())
    probe = system.probe()
    try:
        probe.publish(f"{ROOT}/turn/request", {"turn_id": "t-sys-s", "recognized_text": "청소해줘"})
        eventually(lambda: asked_cloud(system, "청소해줘"))  # in flight: the cloud holds it 5 s
        started = time.monotonic()
        system.machine.ok(["systemctl", "stop", "a2a-edge"], timeout=30)
        took = time.monotonic() - started
        system.cloud.set_faults()
        props = system.show("ActiveState", "Result", "ExecMainStatus")
        assert took < 10, took
        assert (props["ActiveState"], props["Result"], props["ExecMainStatus"]) == (
            "inactive",
            "success",
            "0",
        )
        new = system.journal("-p", "warning").splitlines()[warned:]
        assert [line for line in new if "t-sys-s" not in line] == []  # a clean stop: no warning
        restart_clean(system)
        answer = probe.wait_for(  # before the stop, or as an interrupted turn at the start
            f"{ROOT}/turn/response", lambda b: b.get("turn_id") == "t-sys-s", timeout_s=15
        )
        assert answer["status"] in ("error", "offline", "ok"), answer
    finally:
        probe.close()
        system.cloud.set_faults()


def test_hardening_in_force_and_writes_only_in_the_state_dir(system: System) -> None:
    props = active(system)
    shown = system.show(
        "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
        "RestrictNamespaces", "MemoryDenyWriteExecute", "CapabilityBoundingSet",
        "MemoryMax", "TasksMax", "LimitNOFILE", "User", "UMask", "ProtectProc",
    )  # fmt: skip
    assert shown["NoNewPrivileges"] == "yes" and shown["ProtectSystem"] == "strict"
    assert shown["ProtectHome"] == "yes" and shown["PrivateTmp"] == "yes"
    assert shown["PrivateDevices"] == "yes" and shown["MemoryDenyWriteExecute"] == "yes"
    assert shown["RestrictNamespaces"] == "yes" and shown["CapabilityBoundingSet"] == ""
    assert shown["MemoryMax"] == str(256 * 1024 * 1024) and shown["TasksMax"] == "64"
    assert shown["User"] == "a2a-edge" and shown["UMask"] == "0077"
    assert shown["ProtectProc"] == "invisible"
    security = system.machine.ok(["systemd-analyze", "security", "--no-pager", "a2a-edge"])
    exposure = float(
        re.findall(r"Overall exposure level for a2a-edge.service: ([\d.]+)", security)[0]
    )
    assert exposure <= 1.5, security[-500:]
    probe = (
        "import os\n"
        "for p in ['/etc/x', '/etc/a2a-edge/x', '/opt/a2a-edge/x', '/root/x', '/usr/x',\n"
        "          '/var/lib/x', '/var/log/x', '/var/cache/x']:\n"
        "    try:\n"
        "        open(p, 'w'); print('WROTE', p)\n"
        "    except OSError as e:\n"
        "        print('refused', p, e.errno)\n"
        f"open('{STATE}/x', 'w').close(); os.remove('{STATE}/x'); print('state ok')\n"
        "open('/tmp/a2a-private', 'w').close()\n"  # PrivateTmp: its own /tmp, not the machine's
    )
    inside = system.machine.ok(
        [*as_the_service(system, props["MainPID"]), f"{VENV}/python", "-c", probe]
    )
    assert "WROTE" not in inside and "state ok" in inside, inside
    assert inside.count("refused") == 8
    assert system.machine.run(["test", "-e", "/tmp/a2a-private"]).returncode == 1
    current = system.show("MemoryCurrent", "TasksCurrent")
    if current["MemoryCurrent"].isdigit():  # cgroup v2 host: accounted, under the limits
        assert int(current["MemoryCurrent"]) < int(shown["MemoryMax"])
        assert int(current["TasksCurrent"]) <= 64


def test_a_second_instance_is_refused(system: System) -> None:
    pid = active(system)["MainPID"]
    second = system.machine.run(
        [*AS_USER, f"{VENV}/a2a-edge", "run", "--config", "/etc/a2a-edge/config.toml"],
        timeout=30,
    )
    assert second.returncode == 3, second.stderr
    assert pid in second.stderr.strip().splitlines()[-1]
    assert active(system)["MainPID"] == pid


def test_an_upgrade_over_an_older_db_migrates_with_a_backup_first(
    system: System, tmp_path: Path
) -> None:
    system.machine.ok(["systemctl", "stop", "a2a-edge"])
    older = tmp_path / "state.db"
    migrate(Database(sqlite3.connect(older)), older, MIGRATIONS[:-1])
    state = system.machine.root / STATE.lstrip("/")
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (state / name).unlink(missing_ok=True)
    (state / "state.db").write_bytes(older.read_bytes())
    system.machine.ok(["chown", "a2a-edge:a2a-edge", f"{STATE}/state.db"])
    system.machine.ok(["chmod", "0600", f"{STATE}/state.db"])
    upgrade = system.install()  # the README's upgrade: install.sh again, which starts it
    assert upgrade.returncode == 0, upgrade.stderr
    assert "kept /etc/a2a-edge/config.toml" in upgrade.stdout
    active(system)
    backups = list((state / "backups").glob(f"state-v{len(MIGRATIONS) - 1}-*.db"))
    assert len(backups) == 1, list((state / "backups").iterdir())
    assert mode_owner(system, f"{STATE}/backups/{backups[0].name}").endswith("a2a-edge:a2a-edge")
    for path, version in ((state / "state.db", len(MIGRATIONS)), (backups[0], len(MIGRATIONS) - 1)):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        assert db.execute("PRAGMA user_version").fetchone()[0] == version, path
        db.close()  # the copy was taken before the migration
