"""Every `a2a-edge` command; `main` is the console script's entry (`edge.cli:main`)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """`a2a-edge` (the console script `edge.cli:main`, and `python -m edge`); the commands load
    when it runs, not when one of the CLI's modules is imported."""
    from edge.cli.entry import main as entry

    return entry(argv)
