"""The CLI follows the conventions of Mosquitto/systemd/sqlite-utils-style tools (issue 21):
`--version`, help with defaults on every command and option, tables or `--json` everywhere,
colour only on a terminal (NO_COLOR honoured), `status` exit 3 when the service is not running,
`nothing matched` exit 1, `--yes` for `forget --all`, the variable named in env errors, a quiet
exit on a closed pipe, `config check`, and `run`'s import graph without the output libraries."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from edge import __version__
from edge.cli.entry import main, parser
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, eventually

COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;[0-9;]+)m")


def a2a_edge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


class Cli:
    """`a2a-edge …` in this process (`edge.cli.entry.main`): the same code as the console script,
    without an interpreter start per call. `(exit code, stdout, stderr)`."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self(*args, "--json")
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def json_of(*args: str) -> Any:
    done = a2a_edge(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def under_pty(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal; what it printed and its exit code."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "TERM": "xterm-256color", **(env or {})},
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def _commands(
    top: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """Every parser below `top` with its path and the help line its parent lists it with."""
    found = []
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found.append(((*path, name), sub, helps.get(name, "")))
                found.extend(_commands(sub, (*path, name)))
    return found


# --- help, version, usage -----------------------------------------------------------------------


def test_version() -> None:
    done = a2a_edge("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"a2a-edge {__version__}"


def test_every_command_and_option_has_help_and_shows_its_default() -> None:
    commands = _commands(parser())
    assert len(commands) >= 25
    for path, sub, listed in commands:
        assert listed.strip(), f"a2a-edge {' '.join(path)} has no help line"
        text = sub.format_help()
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            where = f"a2a-edge {' '.join(path)} {action.option_strings or action.dest}"
            assert action.help, f"{where} has no help"
            unset = action.default is None or action.default is False  # 0 and 0.0 are shown
            if action.option_strings and not unset:
                assert f"(default: {action.default})" in " ".join(text.split()), where


def test_help_says_what_each_command_does() -> None:
    top = parser()
    assert "command line." not in (top.description or "")
    assert "home robot" in (top.description or "")
    listed = {path: line for path, _, line in _commands(top)}
    assert "scripted conversation" in listed[("demo",)] and "one turn" not in listed[("demo",)]
    assert "forget" in listed[("memory",)] and "revoke" in listed[("memory",)]
    assert "read-only" not in listed[("memory",)]
    for path in [("memory", "pairs"), ("memory", "sessions"), ("config", "check")]:
        assert path in listed


@pytest.mark.parametrize(
    "args",
    [
        ["workflows", "list", "--limit", "-1"],
        ["inbox", "dead", "--limit", "0"],
        ["memory", "pairs", "--limit", "-1"],
        ["sync", "replay", "--stall-s", "-3"],
    ],
)
def test_a_bad_number_is_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(args)
    assert exited.value.code == 2
    assert "must be" in capsys.readouterr().err


# --- config -------------------------------------------------------------------------------------


def test_an_environment_error_names_the_variable() -> None:
    done = a2a_edge("config", "check", env={"A2A_EDGE_MQTT__PORT": "70000"})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "mqtt.port" in lines[0], lines
    assert "A2A_EDGE_MQTT__PORT" in lines[0]


def test_config_check_prints_the_effective_config_with_its_sources_and_no_secret(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text("tok-SECRET-123\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'[cloud]\nbase_url = "https://planner.example.com"\ntoken_file = "{token}"\n'
    )
    env = {"A2A_EDGE_MQTT__PORT": "1999"}
    done = a2a_edge("config", "check", "--config", str(config), env=env)
    assert done.returncode == 0, done.stderr
    assert "tok-SECRET-123" not in done.stdout
    assert done.stdout.startswith(f"config ok: {config}")
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:] if line}
    assert rows["mqtt.port"] == ["A2A_EDGE_MQTT__PORT", "1999"]
    assert rows["cloud.base_url"] == ["file", '"https://planner.example.com"']
    assert rows["sync.batch_size"] == ["default", "100"]
    assert "cloud.token_file: read, 14 characters (hidden)" in done.stdout

    shown = json_of("config", "check", "--config", str(config))
    assert set(shown) == {"ok", "file", "settings", "secrets", "catalog", "warnings"}
    assert shown["ok"] is True and shown["warnings"] == []  # docs/catalog.md
    assert "tok-SECRET-123" not in json.dumps(shown)
    keys = {row["key"]: row for row in shown["settings"]}
    assert keys["cloud.token_file"]["value"] == str(token)

    config.write_text('[cloud]\nbase_url = "https://x.example"\ntoken_file = "/nonexistent"\n')
    bad = a2a_edge("config", "check", "--config", str(config))
    assert bad.returncode == 2 and "cloud.token_file" in bad.stderr


# --- output conventions -------------------------------------------------------------------------


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path) -> None:
    missing = ["workflows", "list", "--config", str(tmp_path / "nope.toml")]
    code, shown = under_pty(*missing)
    assert code == 2 and "file not found" in shown
    assert COLOUR.search(shown), repr(shown)
    code, shown = under_pty(*missing, env={"NO_COLOR": "1"})
    assert code == 2 and "file not found" in shown and not COLOUR.search(shown), repr(shown)
    assert "\x1b[" not in shown, repr(shown)  # no bold either: no escape code at all
    piped = a2a_edge(*missing)
    assert piped.returncode == 2 and "\x1b" not in piped.stderr


def test_status_json_without_a_state_db_is_still_json(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'state_dir = "{tmp_path / "none"}"\n')
    done = a2a_edge("status", "--json", "--config", str(config))
    assert done.returncode == 3
    shown = json.loads(done.stdout)
    assert shown["service"] == "not running" and shown["error"]


def test_a_progress_bar_on_a_terminal_only() -> None:
    script = (
        "from edge.cli import out as cli_out\n"
        "with cli_out.progress(300, 'sync replay') as update:\n"
        "    for done in (100, 200, 300):\n"
        "        update(done, 300 - done)\n"
    )
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=follower, stdout=follower)
    os.close(follower)
    out = b""
    while select.select([leader], [], [], 20)[0]:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    os.close(leader)
    assert proc.wait(timeout=20) == 0
    assert "sync replay" in out.decode() and "300/300" in out.decode()
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == "" and piped.stdout == ""


def test_run_does_not_import_the_output_libraries() -> None:
    """The service's footprint is a tracked figure: `rich` (and pygments, markdown-it under it)
    is for the CLI's output only. This venv has click, pygments and rich, the worst case: httpx
    would import its own CLI with them unless edge/__init__.py declines it."""
    script = (
        "import sys\n"
        "from edge.cli.entry import parser\n"
        "from edge import wiring\n"
        "from edge.cli import service as cli_service\n"
        "from edge.runtime import executor as runtime\n"
        "args = parser().parse_args(['run', '--config', '/nonexistent.toml'])\n"
        "assert args.func is cli_service.cmd_run\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'pygments',"
        " 'markdown_it'))\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- against a real service, then with it stopped -----------------------------------------------


FAST_BEAT = {"WATCHDOG_USEC": "2000000"}  # a heartbeat every second, not every 5 s
CLI_DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def documented_keys() -> dict[str, set[str]]:
    """docs/cli.md's list of what each read command's `--json` holds: a bullet
    "- `memory pairs` (a row): `pair_id`, …" becomes {"memory pairs": {"pair_id", …}}."""
    text = CLI_DOC.read_text(encoding="utf-8")
    section = text.split("## What the read commands' `--json` holds", 1)[1].split("\n## ", 1)[0]
    bullets = re.split(r"\n- ", "\n" + section.split("\n- ", 1)[1])
    keys: dict[str, set[str]] = {}
    for bullet in filter(None, bullets):
        label, _, listed = bullet.partition(":")
        keys[" ".join(re.findall(r"`([^`]+)`", label))] = set(re.findall(r"`([^`]+)`", listed))
    return keys


def test_read_commands_print_tables_or_documented_json_and_status_exit_3_when_stopped(
    runtime_factory: RuntimeFactory, probe: MqttProbe, cli: Cli
) -> None:
    runtime = runtime_factory(env=FAST_BEAT)
    config = str(runtime.config)
    probe.turn("t-1", "안녕")
    probe.turn("t-2", "고마워")

    documented = documented_keys()
    running = eventually(lambda: (s := cli.json("status", "--config", config))["last_seen"] and s)
    assert running["service"] == "running" and running["heartbeat_age_s"] < 15
    assert set(running) == documented["status"]
    assert cli("status", "--config", config)[0] == 0
    assert runtime.terminate() == 0

    code, out, _ = cli("status", "--config", config)
    assert code == 3
    first = out.splitlines()[0]
    assert re.fullmatch(r"a2a-edge not running, last seen \d+(\.\d)? s ago; .*", first), first
    assert not any('{"' in line for line in out.splitlines()), out
    assert re.search(r"^sync\s+cursor \S*, version \S*$", out, re.MULTILINE), out
    code, out, _ = cli("status", "--json", "--config", config)
    shown = json.loads(out)
    assert code == 3 and shown["service"] == "not running" and shown["health"] == "-"
    assert shown["last_seen"] >= running["last_seen"]
    assert set(shown) == documented["status"]
    # SPEC 5.7: each person's counts; these turns named no speaker, so they are the household's
    assert set(shown["people"]["household"]) == documented["status people"]
    assert shown["people"] == {
        "household": {"pairs": 2, "sessions": 1, "daily_summaries": 0, "profile_items": 0}
    }

    pairs = cli.json("memory", "pairs", "--config", config)
    assert [p["turn_id"] for p in pairs] == ["t-2", "t-1"]
    assert all(set(p) == documented["memory pairs"] for p in pairs), pairs
    assert {p["person_id"] for p in pairs} == {"household"}  # SPEC 5.7: whose pair
    sessions = cli.json("memory", "sessions", "--config", config)
    assert len(sessions) == 1 and sessions[0]["pairs"] == 2
    assert set(sessions[0]) == documented["memory sessions"]
    assert sessions[0]["person_id"] == "household"  # SPEC 5.7: whose session
    assert len(cli.json("memory", "pairs", "--limit", "1", "--config", config)) == 1
    code, out, _ = cli("memory", "pairs", "--config", config)
    assert out.split()[:2] == ["pair_id", "session_id"] and pairs[1]["pair_id"] in out

    for args in (["memory", "show"], ["memory", "snapshot"], ["sync", "status"]):
        assert set(cli.json(*args, "--config", config)) == documented[" ".join(args)], args
        code, out, _ = cli(*args, "--config", config)
        assert code == 0 and out.strip(), args
    for args in (["workflows", "list"], ["inbox", "dead"]):
        assert cli.json(*args, "--config", config) == []
    for args in (["memory", "show"], ["sync", "status"]):
        lines = cli(*args, "--config", config)[1].splitlines()
        assert not any(line.lstrip().startswith(("{", "[")) for line in lines), lines

    code, _, err = cli("workflows", "trace", "wf-none", "--config", config)
    assert code == 1 and "nothing matched" in err


def test_forget_says_nothing_matched_and_all_needs_yes(
    runtime_factory: RuntimeFactory, probe: MqttProbe, cli: Cli
) -> None:
    runtime = runtime_factory()
    config = str(runtime.config)
    probe.turn("t-1", "안녕")
    code, _, err = cli("memory", "forget", "--pair", "pair-nope", "--config", config)
    assert code == 1 and err.strip() == "a2a-edge: nothing matched: no pair pair-nope", err
    code, _, err = cli("memory", "revoke", "--key", "nope", "--config", config)
    assert code == 1 and "nothing matched: no profile item nope" in err
    assert runtime.terminate() == 0

    code, _, err = cli("memory", "forget", "--all", "--config", config)
    assert code == 2 and "--yes" in err
    pairs = cli.json("memory", "pairs", "--config", config)
    assert len(pairs) == 1  # nothing was changed
    code, out, err = cli("memory", "forget", "--pair", pairs[0]["pair_id"], "--config", config)
    assert code == 0, err
    assert re.search(r"^pairs\s+1$", out, re.MULTILINE), out
    code, out, err = cli("memory", "forget", "--all", "--yes", "--config", config)
    assert code == 0, err


def test_a_closed_pipe_ends_quietly(runtime_factory: RuntimeFactory) -> None:
    config = str(runtime_factory().config)
    read, write = os.pipe()
    os.close(read)  # `| true`: the reader is gone before anything is written
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "edge", "memory", "snapshot", "--json", "--config", config],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
        )
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.stderr == "" and proc.returncode == 141


def test_forget_all_asks_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal `forget --all` asks; anything but y/yes changes nothing (exit 2). It asks
    before it reads the config's state dir, so no service is needed to see the question."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edge",
            "memory",
            "forget",
            "--all",
            "--config",
            str(tmp_path / "none.toml"),
        ],
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    while b"[y/N]" not in seen and select.select([leader], [], [], 20)[0]:
        seen += os.read(leader, 4096)
    assert b"forget everything the robot remembers" in seen, seen
    os.write(leader, b"n\n")
    rest = b""
    while select.select([leader], [], [], 20)[0]:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        rest += data
    os.close(leader)
    assert proc.wait(timeout=20) == 2
    assert b"not confirmed; nothing was changed" in rest, rest
