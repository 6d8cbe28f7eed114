"""The conventions every `a2a-edge` command follows, in one place, so that a new command group
(`edge/cli/<group>.py` with a `register(sub)`, listed in `edge/cli/entry.py`'s `GROUPS`) gets them
by building its parsers here:

- help on every command and option, with the default shown (`Formatter`);
- `--config FILE` and `--json` on every command that reads or changes state (`command`);
- exit codes: 0 ok, 1 failure or nothing matched (`NothingMatched`), 2 bad config or usage
  (`UsageError`, argparse's own), 3 not running (`status`) or the state DB cannot be used,
  4 `reload` applied but keys wait for a restart (`EXIT_RESTART`, edge/host/reload.py);
  with `--json`, `"ok": true` only with exit 0;
- a question before anything that cannot be undone (`confirm`): `--yes`, or a prompt on a
  terminal, else refused (exit 2).

This module imports nothing heavy: `a2a-edge run` imports it. Output (tables, colour,
progress) is in `edge/cli/out.py`, which imports `rich` only when a command prints.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeAlias

from a2a_common.errors import EdgeError
from edge.config.settings import DEFAULT_CONFIG_PATH, Settings, load_settings

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_STORAGE = 3
EXIT_NOT_RUNNING = 3  # `status`, as `systemctl status` says of an inactive unit

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Command: TypeAlias = Callable[[argparse.Namespace], int]


class NothingMatched(EdgeError):
    """The selector named nothing (an unknown pair, key, workflow): exit 1."""


class UsageError(EdgeError):
    """A request the CLI refuses as given (e.g. `forget --all` without `--yes`): exit 2."""


class Formatter(argparse.HelpFormatter):
    """Descriptions as written; every option's default after its help unless it is empty."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        # `is`, not `in`: 0 and 0.0 equal False, and a default of 0 is a default to show
        unset = default is None or default is False or default == "" or default is argparse.SUPPRESS
        shown = not unset and action.option_strings
        if shown and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


CONFIG_HELP = f"TOML config (without it: {DEFAULT_CONFIG_PATH} if it exists, else defaults)"


def group(sub: Subparsers, name: str, help: str, description: str = "") -> Subparsers:
    """A command group (`a2a-edge <name> <command>`); its commands go on the returned object."""
    parser = sub.add_parser(
        name, help=help, description=description or help, formatter_class=Formatter
    )
    return parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")


def command(
    sub: Subparsers,
    name: str,
    help: str,
    func: Command,
    *,
    description: str = "",
    config: bool = True,
    json: bool = True,
) -> argparse.ArgumentParser:
    """One command with the shared options; add its own with `add_argument(..., help=...)`."""
    parser = sub.add_parser(
        name, help=help, description=description or help, formatter_class=Formatter
    )
    if config:
        parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    if json:
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=func)
    return parser


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (`--limit -1` is refused, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0 (got {text})")
    return value


def add_limit(parser: argparse.ArgumentParser, default: int, what: str) -> None:
    parser.add_argument(
        "--limit", type=positive_int, default=default, metavar="N", help=f"at most N {what}"
    )


def settings_of(args: argparse.Namespace) -> Settings:
    return load_settings(Path(args.config) if getattr(args, "config", None) else None)


def confirm(question: str, *, yes: bool, flag: str = "--yes") -> None:
    """Go on when `yes`; else ask on a terminal; else refuse (`UsageError`, exit 2)."""
    if yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError(f"{question.rstrip('?')}: refused without {flag} (no terminal to ask)")
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise UsageError("not confirmed; nothing was changed")


def payload_of(args: argparse.Namespace, options: list[tuple[str, str]]) -> dict[str, Any]:
    """The admin request's args from (dest, name) pairs, leaving out options not given."""
    out: dict[str, Any] = {}
    for dest, name in options:
        value = getattr(args, dest, None)
        if value not in (None, False):
            out[name] = value
    return out
