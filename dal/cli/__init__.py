"""The ``dal`` command line (``dal.cli.app``); ``main`` is the console script's entry point."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``dal`` command (the command tree is imported only when it runs)."""
    from dal.cli.app import main as run

    run(argv)
