"""How the CLI prints: Rich tables as wide as the terminal, JSON views, and the one byte-size formatter.

``size_text`` is ``dal.progress.size_text`` (binary units: KiB, MiB…), the formatter the progress line and the
web UI use too, so a size reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from dal.errors import printable
from dal.ops import views
from dal.progress import size_text

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["cell_text", "console", "emit_json", "print_table", "short_text", "size_text"]


def console() -> Console:
    """Tables as wide as the terminal (80 columns off a terminal, or $COLUMNS): long values fold onto more lines."""
    from rich.console import Console

    return Console(soft_wrap=False)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as the CLI's JSON (``dal.ops.views.to_json``: indented, datetimes as text)."""
    click.echo(views.to_json(obj))


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a Rich table: numbers right-aligned, long text folded (never cut), user text escaped."""
    from rich.table import Table

    table = Table(title=cell_text(title) if title else None, show_lines=False, header_style="bold")
    for c in columns:
        # fold, never cut: a name or path is still all there (on more lines) in a narrow terminal; short values
        # (numbers, times) stay whole on one line and the wider text columns give way
        table.add_column(c, justify="right" if c in _NUMERIC else "left", overflow="fold", no_wrap=c in _WHOLE)
    for r in rows:
        table.add_row(*("" if v is None else cell_text(v) for v in r))
    console().print(table)


_NUMERIC = {"version", "latest", "rows", "files", "size", "#"}
_WHOLE = _NUMERIC | {"created (UTC)", "updated", "format", "operation", "status", "nullable"}


def cell_text(value: object) -> str:
    """User text for a Rich table: control characters (ESC sequences, newlines) shown as escapes, and
    Rich markup escaped (type names like timestamp[us, tz=UTC] and descriptions like "[bold]x")."""
    from rich.markup import escape

    return escape(printable(value))


def short_text(v: object) -> str:
    """A value cut to 40 characters for a table cell (``-`` for None)."""
    if v is None:
        return "-"
    text = str(v)
    return text if len(text) <= 40 else text[:37] + "..."
