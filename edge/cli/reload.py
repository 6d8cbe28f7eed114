"""`a2a-edge reload`: SIGHUP the service and wait for its mark (edge/host/reload.py), so that
systemd's `ExecReload=` returns only once the reload is applied or refused."""

from __future__ import annotations

import argparse
import sys

from edge.cli.kit import Subparsers, command, positive_float, settings_of
from edge.host.reload import WAIT_S, service_pid, signal_and_wait
from edge.host.statelock import LOCK_NAME


def cmd_reload(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    state_dir = settings.state_db_path.parent
    pid = args.pid or service_pid(state_dir)
    if pid is None:
        print(f"a2a-edge: no running service holds {state_dir / LOCK_NAME}", file=sys.stderr)
        return 1
    code, text = signal_and_wait(state_dir, pid, args.timeout_s)
    print(f"a2a-edge: {text}", file=sys.stderr if code else sys.stdout)
    return code


def register(sub: Subparsers) -> None:
    reload = command(
        sub,
        "reload",
        "SIGHUP the service and wait until it has applied the config (the unit's ExecReload)",
        cmd_reload,
        description="Send SIGHUP to the running service and return once it has applied the"
        " config file again (log level, privacy policy), or exit 1 with the reason it refused"
        " it (the service keeps its running config). systemd's ExecReload= runs this, so that"
        " `systemctl reload` returns only after the reload.",
        json=False,
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
