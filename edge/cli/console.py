"""`a2a-edge console [--config FILE] [--port N] [--bind ADDR]`: a live local page of workflows,
memory, sync, health and consent (docs/console.md). A process of its own: `run` imports this
module for the parser only; the server, its MQTT follower and the page load when it starts."""

from __future__ import annotations

import argparse
import ipaddress

from edge.cli.kit import Subparsers, command, settings_of

DEFAULT_PORT = 8765


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535 (got {value}; 0: any free port)")
    return value


def bind_address(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address") from None


def cmd_console(args: argparse.Namespace) -> int:
    from edge.cli import console_main

    return console_main.serve(settings_of(args), args.bind, args.port)


def register(sub: Subparsers) -> None:
    console = command(
        sub,
        "console",
        "a live local page: workflows, memory, sync, health, consent (Ctrl-C stops it)",
        cmd_console,
        json=False,
    )
    console.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, metavar="N", help="TCP port (0: any)"
    )
    console.add_argument(
        "--bind",
        type=bind_address,
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on; only this one and localhost are accepted as Host",
    )
