"""a2a-edge: the device-resident runtime of a home robot's A2A assistant — the service (`run`)
and the commands an operator uses on the robot to look at it and change it.

Every command has `--help`; most take `--config FILE` and `--json`. Exit codes: 0 ok, 1 failure
or nothing matched, 2 bad config or usage, 3 the service is not running (`status`) or the state
DB cannot be used (systemd does not restart the service on 2 or 3), 4 `reload` applied the file
but keys changed in it that wait for a restart (named).

A command group is a module `edge/cli/<group>.py` with `register(sub)` built with
`edge.cli.kit` (help with defaults, `--config`, `--json`, exit codes, `--yes`), listed in
`GROUPS` below; see docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from a2a_common.backup import BackupError
from a2a_common.sqlite import StorageError
from edge import __version__
from edge.cli import consent as cli_consent
from edge.cli import console as cli_console
from edge.cli import dev as cli_dev
from edge.cli import memory as cli_memory
from edge.cli import reload as cli_reload
from edge.cli import service as cli_service
from edge.cli import work as cli_work
from edge.cli.kit import (
    EXIT_CONFIG,
    EXIT_FAILURE,
    EXIT_STORAGE,
    Formatter,
    NothingMatched,
    Subparsers,
    UsageError,
)
from edge.config.errors import ConfigError, ServiceSilent
from taskmanager import CatalogError

# each adds its commands to the top level; the order is the order of `a2a-edge --help`
GROUPS: list[Callable[[Subparsers], None]] = [
    cli_service.register,  # run, status, config, db
    cli_reload.register,  # reload (the unit's ExecReload)
    cli_memory.register,  # memory
    cli_work.register,  # workflows, sync, inbox
    cli_consent.register,  # consent
    cli_console.register,  # console (a process of its own)
    cli_dev.register,  # demo, sim
]
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


def parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    top = argparse.ArgumentParser(
        prog="a2a-edge",
        description=doc.split("\n\n")[0],
        epilog=doc.split("\n\n")[1],
        formatter_class=Formatter,
    )
    top.add_argument("--version", action="version", version=f"a2a-edge {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in GROUPS:
        register(sub)
    return top


def _failed(exc: Exception) -> int:
    """One line on stderr and the exit code for what a command raised."""
    from edge.cli import out as cli_out

    if isinstance(exc, ConfigError):
        message, code = f"config error: {exc}", EXIT_CONFIG
    elif isinstance(exc, CatalogError):  # its key: the catalog file the operator fixes
        message, code = f"config error: {exc.key}: {exc}", EXIT_CONFIG
    elif isinstance(exc, UsageError):
        message, code = str(exc), EXIT_CONFIG
    elif isinstance(exc, NothingMatched):
        message, code = f"nothing matched: {exc}", EXIT_FAILURE
    elif isinstance(exc, StorageError):
        message, code = f"state DB: {exc}", EXIT_STORAGE
    else:
        message, code = str(exc), EXIT_FAILURE
    cli_out.error(message)
    return code


def _quiet_pipe() -> int:
    """The reader went away (`a2a-edge … | head`): no traceback, and nothing more written —
    stdout goes to /dev/null so the interpreter's last flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
    except BrokenPipeError:
        return _quiet_pipe()
    except (
        ConfigError,
        CatalogError,
        UsageError,
        NothingMatched,
        ServiceSilent,
        BackupError,
        StorageError,
    ) as exc:
        return _failed(exc)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
