"""`a2a-edge reload`: SIGHUP the service and wait for its mark (edge/host/reload.py), so that
systemd's `ExecReload=` returns only once the reload is applied or refused."""

from __future__ import annotations

import argparse
from typing import Any

from edge.cli.kit import EXIT_FAILURE, Subparsers, command, positive_float, settings_of
from edge.config.errors import ConfigError
from edge.host.reload import WAIT_S, service_pid, signal_and_answer
from edge.host.statelock import LOCK_NAME


def cmd_reload(args: argparse.Namespace) -> int:
    try:
        settings = settings_of(args)
    except ConfigError as exc:  # a file the service would refuse: a refused reload, not sent
        why = f"config error: {exc}; not reloaded, the service keeps its running config"
        return _answer(args, EXIT_FAILURE, {"ok": False, "error": why})
    state_dir = settings.state_db_path.parent
    pid = args.pid or service_pid(state_dir)
    if pid is None:
        why = f"no running service holds {state_dir / LOCK_NAME}"
        answer: dict[str, Any] = {"ok": False, "error": why}
        code = EXIT_FAILURE
    else:
        code, answer = signal_and_answer(state_dir, pid, args.timeout_s)
    return _answer(args, code, answer)


def _answer(args: argparse.Namespace, code: int, answer: dict[str, Any]) -> int:
    """The answer on stdout under `--json` (`ok` agrees with the exit code), the error as one
    line on stderr, or what the service said."""
    from edge.cli import out as cli_out

    if args.json:
        cli_out.emit_json(answer)
    if code:
        cli_out.error(str(answer["error"]))
    elif not args.json:
        print(f"a2a-edge: {answer['result']['message']}")
    return code


def register(sub: Subparsers) -> None:
    reload = command(
        sub,
        "reload",
        "SIGHUP the service and wait until it has applied the config (the unit's ExecReload)",
        cmd_reload,
        description="Send SIGHUP to the running service and return once it has applied the"
        " config file again (log level, privacy policy, consent, experience mode): exit 0."
        " Exit 4 when it applied them but other keys changed in the file that only a restart"
        " applies (they are named; the service runs with the values it started with). Exit 1"
        " with the reason it refused the file (the service keeps its running config), or when"
        " no service runs. systemd's ExecReload= runs this, so that `systemctl reload` returns"
        " only after the reload, and fails when it is not all applied.",
    )
    reload.add_argument(
        "--pid", type=int, default=None, help="the service's pid (default: from its lock file)"
    )
    reload.add_argument(
        "--timeout-s",
        type=positive_float,
        default=WAIT_S,
        metavar="S",
        help="how long to wait for the service",
    )
