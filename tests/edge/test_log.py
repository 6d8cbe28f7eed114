"""Logs an operator reads with journalctl: priority prefixes and no timestamp of our own under
journald, ids as JSON fields, no WARNING for a clean stop, each rejection logged once."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

from edge.host.log import JsonFormatter, fields, formatter, under_journald
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, workflow_event
from tests.taskmanager.helpers import MOVE_PURIFY

PREFIXED = re.compile(r"^<[0-7]>[a-z_.]+: ")


def record(level: int, msg: str, *args: object, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("edge.app.device", level, __file__, 1, msg, args, None)
    for key, value in extra.items():
        setattr(rec, key, value)
    return rec


def test_journal_stream_must_name_stderr_itself(tmp_path: Path) -> None:
    with (tmp_path / "a").open("w") as one, (tmp_path / "b").open("w") as other:
        st = os.fstat(one.fileno())
        env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        assert under_journald(one, env)
        assert not under_journald(other, env)  # stderr redirected elsewhere: plain text again
    assert not under_journald(io.StringIO(), env)
    assert not under_journald(one, {"JOURNAL_STREAM": "junk"})
    assert not under_journald(one, {})


def test_journal_lines_carry_the_priority_and_no_timestamp() -> None:
    fmt = formatter("text", journald=True)
    assert fmt.format(record(logging.WARNING, "refused %s", "x")) == "<4>edge.app.device: refused x"
    assert fmt.format(record(logging.INFO, "ok")) == "<6>edge.app.device: ok"
    assert fmt.format(record(logging.ERROR, "a\nb")) == "<3>edge.app.device: a\n<3>b"
    assert fmt.format(record(logging.DEBUG, "d")).startswith("<7>")
    plain = formatter("text", journald=False).format(record(logging.INFO, "ok"))
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO edge.app.device: ok$", plain)
    as_json = formatter("json", journald=True).format(record(logging.ERROR, "boom"))
    assert as_json.startswith("<3>{") and json.loads(as_json[3:])["level"] == "ERROR"


def test_ids_are_json_fields_not_text() -> None:
    extra = fields(turn_id="t-1", workflow_ids=["wf-1", "wf-2"], 말="안녕")
    line = JsonFormatter().format(record(logging.INFO, "turn %s", "t-1", **extra))
    entry = json.loads(line)
    assert entry["turn_id"] == "t-1" and entry["workflow_ids"] == ["wf-1", "wf-2"]
    assert entry["msg"] == "turn t-1" and "안녕" in line  # UTF-8, not \\u escapes


def test_under_journald_the_runtime_logs_priorities_once_and_stops_without_warning(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    log_file = tmp_path / "runtime.log"  # RuntimeProcess appends stdout+stderr to it
    log_file.touch()
    st = log_file.stat()
    runtime = runtime_factory(
        env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, log={"level": "INFO"}
    )
    probe.publish(f"{ROOT}/turn/request", b'{"turn_id": "t-bad", "recognized_text": 5}')
    probe.wait_for(f"{ROOT}/turn/response", lambda b: b.get("turn_id") == "t-bad")
    bad = {**MOVE_PURIFY, "workflow_id": "wf-rej", "steps": []}
    probe.publish(f"{ROOT}/workflow/request", bad)
    workflow_event(probe, "wf-rej", "WORKFLOW_REJECTED")
    assert runtime.terminate() == 0
    lines = runtime.log().splitlines()
    assert lines and all(PREFIXED.match(line) for line in lines), lines[:5]
    warnings = [line for line in lines if line.startswith(("<4>", "<3>", "<2>"))]
    assert [line for line in warnings if "t-bad" in line or "invalid_field" in line] == [
        "<4>edge.app.refusals: refused message on a2a/robot-test/turn/request: invalid_field"
        " (recognized_text: Input should be a valid string)"
    ]
    assert len([line for line in warnings if "wf-rej" in line]) == 1, warnings
    assert len(warnings) == 2, warnings  # nothing else: a clean stop is not a warning
    assert any(line.startswith("<6>edge.runtime.executor: broker disconnected") for line in lines)


def test_json_lines_carry_the_ids_as_fields(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory(log={"level": "INFO", "format": "json"})
    probe.publish(f"{ROOT}/turn/request", b'{"turn_id": "t-bad", "recognized_text": 5}')
    probe.wait_for(f"{ROOT}/turn/response", lambda b: b.get("turn_id") == "t-bad")
    probe.turn("t-ok", "안녕")
    assert runtime.terminate() == 0
    entries = [json.loads(line) for line in runtime.log().splitlines()]
    refused = [e for e in entries if e.get("error") == "invalid_field"]
    assert len(refused) == 1 and refused[0]["turn_id"] == "t-bad"
    assert refused[0]["topic"] == f"{ROOT}/turn/request" and refused[0]["level"] == "WARNING"
    answered = [e for e in entries if e["msg"].startswith("turn t-ok answered")]
    assert len(answered) == 1 and answered[0]["turn_id"] == "t-ok"
    assert answered[0]["session_id"] and isinstance(answered[0]["workflow_ids"], list)
    assert "[" not in answered[0]["msg"]  # no Python list repr in the text


def test_a_handler_failure_is_one_error_line_not_an_error_and_a_warning(
    runtime_factory: RuntimeFactory, probe: MqttProbe
) -> None:
    runtime = runtime_factory(env={"A2A_DEBUG_HOOKS": "1"}, log={"level": "INFO"})
    payload = b'{"turn_id": "t-boom", "recognized_text": "x", "a2a_debug_raise": 1}'
    probe.publish(f"{ROOT}/turn/request", payload)
    probe.wait_for(f"{ROOT}/turn/response", lambda b: b.get("turn_id") == "t-boom")
    assert runtime.terminate() == 0
    lines = runtime.log().splitlines()
    loud = [line for line in lines if " WARNING " in line or " ERROR " in line]
    assert len(loud) == 1 and "handler for" in loud[0] and " ERROR " in loud[0], loud


def test_under_journald_the_exit_line_of_a_command_is_an_error(tmp_path: Path) -> None:
    """Seen under a real systemd: exit 2's `a2a-edge: config error: …` was logged at the
    stream's priority (info), so `journalctl -p warning` did not show why it stopped."""
    bad = tmp_path / "config.toml"
    bad.write_text(f'state_dir = "{tmp_path}"\nno_such_key = 1\n')
    err = tmp_path / "stderr"
    with err.open("w") as stream:
        st = os.fstat(stream.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}", "COLUMNS": "40"}
        done = subprocess.run(
            [sys.executable, "-m", "edge", "run", "--config", str(bad)],
            stderr=stream,
            env=env,
            timeout=30,
        )
    assert done.returncode == 2
    (line,) = err.read_text().splitlines()  # one entry, not wrapped at the console's width
    assert line.startswith("<3>a2a-edge: config error: ") and "no_such_key" in line, line
