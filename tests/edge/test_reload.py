"""`systemctl reload` semantics: ExecReload (`a2a-edge reload`) returns only once the service
applied the config, and systemd hears RELOADING=1 + MONOTONIC_USEC= then READY=1."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from edge.host import reload
from tests.conftest import RuntimeFactory, state_dir


def test_reload_returns_after_the_reload_is_applied_and_notifies_systemd(
    runtime_factory: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtime_factory(log={"level": "INFO"})
    assert runtime.proc is not None and runtime.notify is not None
    config = runtime.config
    config.write_text(config.read_text().replace('level = "INFO"', 'level = "DEBUG"'))
    before = reload.monotonic_usec()
    done = subprocess.run(
        [sys.executable, "-m", "edge", "reload", "--config", str(config)],  # pid: the lock's
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "reloaded: log level DEBUG" in runtime.log()  # applied before the command ended
    lines = runtime.notify.lines
    at = lines.index("RELOADING=1")
    usec = lines[at + 1]
    assert usec.startswith("MONOTONIC_USEC=") and int(usec.split("=")[1]) >= before
    assert "READY=1" in lines[at + 2 :]  # the reload is over
    assert lines.count("READY=1") == 2


def test_a_refused_reload_fails_the_command_and_keeps_the_service(
    runtime_factory: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtime_factory(log={"level": "INFO"})
    assert runtime.proc is not None
    good = runtime.config.read_text()
    runtime.config.write_text(good.replace('level = "INFO"', 'level = "LOUD"'))
    started = time.monotonic()
    code, text = reload.signal_and_wait(state_dir(tmp_path), runtime.proc.pid)
    assert time.monotonic() - started < 5
    assert code == 1 and text.startswith("reload refused, the service keeps its running config")
    assert "log.level" in text
    done = subprocess.run(
        [sys.executable, "-m", "edge", "reload", "--config", str(runtime.config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    # a config that does not load is a refused reload (d82928c): exit 1, the service not signalled
    assert done.returncode == 1 and "config error: log.level" in done.stderr
    assert runtime.proc.poll() is None
    code, text = reload.signal_and_wait(state_dir(tmp_path), 2**22 + 7, 1.0)
    assert code == 1 and "not running" in text


def test_keys_a_reload_does_not_apply_are_named() -> None:
    """Seen under a real systemd: `systemctl reload` after changing mqtt.port succeeded and
    said nothing, and the service kept the old port. The keys that wait for a restart are
    named (never their values); what a reload applies is not."""
    from edge.config.settings import Settings

    running = Settings()
    fresh = Settings.model_validate(
        {
            "mqtt": {"port": 1884, "password_file": "/etc/a2a-edge/secret"},
            "log": {"level": "DEBUG", "format": "json"},
            "privacy": {"consented_categories": ["health"]},
            "experience": {"mode": "off"},
        }
    )
    assert reload.needs_restart(running, fresh) == ["log.format", "mqtt.password_file", "mqtt.port"]
    assert reload.needs_restart(running, Settings()) == []
