"""How the CLI prints: tables in the layout the reader needs, JSON views, and the one byte-size formatter.

A table command prints in one of four layouts (``--output`` / ``-o``; ``--json`` is ``-o json``):

- ``table``, the default on a terminal: a Rich table as wide as the terminal, long text folded onto more lines;
- ``tsv``, the default when stdout is not a terminal (a pipe, a file, a program's capture): a header line, then
  one row per line, cells separated by tabs, never folded, cut or boxed, so ``grep``, ``cut -f``, ``sort``,
  ``awk -F'\\t'`` and the ``csv`` module read it. A cell never holds a tab or a newline (control characters
  are escaped); a cell holding a double quote is quoted as CSV quotes it, so ``csv.reader(f,
  delimiter="\\t")`` and ``pandas.read_csv(sep="\\t")`` read every cell back. Only the header and the rows
  go to stdout: the title is left out, and the lines printed after a table (``dal diff``'s row count) or
  instead of one (``no datasets yet``, after the header line) go to stderr;
- ``plain``: for people, without a box: the title, the header and one row per line in aligned columns as wide
  as their widest cell (never folded), then any lines after the table;
- ``json``: the command's JSON view.

The cells are the same text in every layout (numbers with thousands separators, sizes in binary units, times
in ISO 8601 UTC to the second, floats to ``SIGNIFICANT_DIGITS``), except where a layout lacks what the table
has (``dal files`` prints whole paths in tsv, which has no title naming the location) or the table lacks room
(``dal stats`` cuts a long text min or max in the table); only JSON has full precision.

``size_text`` is ``dal.progress.size_text`` (binary units: KiB, MiB…), the formatter the progress line and the
web UI use too, so a size reads the same everywhere.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from dal.cli.base import OUTPUTS
from dal.errors import printable
from dal.ops import views
from dal.progress import columns as text_columns
from dal.progress import size_text

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "OUTPUTS",
    "SIGNIFICANT_DIGITS",
    "cell_text",
    "console",
    "emit_json",
    "number_text",
    "output_format",
    "print_empty",
    "print_table",
    "short_text",
    "size_text",
    "stdout_is_terminal",
    "time_text",
]

SIGNIFICANT_DIGITS = 6  # floats in tables (stats' min and max): as printf's %g and NumPy/pandas print them


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal (a closed or replaced stream without ``isatty`` is not)."""
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def output_format(as_json: bool, output: str | None) -> str:
    """The layout a table command prints in: ``json`` for --json, else --output, else ``table`` on a terminal
    and ``tsv`` off one.

    Raises:
        click.UsageError: --json with another --output.
    """
    if as_json and output not in (None, "json"):
        raise click.UsageError(f"--json and --output {output} ask for different outputs: give one of them")
    if as_json:
        return "json"
    if output is not None:
        return output
    return "table" if stdout_is_terminal() else "tsv"


def console() -> Console:
    """Tables as wide as the terminal (80 columns off a terminal, or $COLUMNS): long values fold onto more lines."""
    from rich.console import Console

    return Console(soft_wrap=False)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as the CLI's JSON (``dal.ops.views.to_json``: indented, datetimes as text)."""
    click.echo(views.to_json(obj))


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    output: str = "table",
    *,
    after: Sequence[str] = (),
) -> None:
    """Print a table in the layout ``output`` (see the module's docstring); user text is escaped in all of them.

    Args:
        title: a line above the table (``table`` and ``plain``).
        columns: the header; numbers (``_NUMERIC``) are right-aligned.
        rows: the cells (None prints as an empty cell).
        output: ``table``, ``plain`` or ``tsv``.
        after: lines printed below the table (``table`` and ``plain``; on stderr for ``tsv``).
    """
    if output == "tsv":
        _print_tsv(columns, rows)
        for line in after:
            click.echo(printable(line), err=True)
        return
    if output == "plain":
        _print_plain(title, columns, rows)
    else:
        _print_rich(title, columns, rows)
    for line in after:
        click.echo(printable(line))


def print_empty(columns: Sequence[str], message: str, output: str = "table") -> None:
    """What a table command prints when it has no rows: the message on stdout, or for ``tsv`` the header line
    on stdout (a reader still finds the columns, and no message is taken for a row) and the message on stderr."""
    if output == "tsv":
        _print_tsv(columns, ())
        click.echo(printable(message), err=True)
    else:
        click.echo(printable(message))


def _print_rich(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    from rich.table import Table

    table = Table(title=cell_text(title) if title else None, show_lines=False, header_style="bold")
    for c in columns:
        # fold, never cut: a name or path is still all there (on more lines) in a narrow terminal; short values
        # (numbers, times) stay whole on one line and the wider text columns give way
        table.add_column(c, justify="right" if c in _NUMERIC else "left", overflow="fold", no_wrap=c in _WHOLE)
    for r in rows:
        table.add_row(*("" if v is None else cell_text(v) for v in r))
    console().print(table)


def _plain_cells(row: Sequence[object]) -> list[str]:
    return ["" if v is None else printable(v) for v in row]


def _print_tsv(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, dialect="excel-tab", lineterminator="\n")
    writer.writerow(_plain_cells(columns))
    for r in rows:
        writer.writerow(_plain_cells(r))
    click.echo(buffer.getvalue(), nl=False)


def _print_plain(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    head = _plain_cells(columns)
    body = [_plain_cells(r) for r in rows]
    widths = [max([text_columns(row[i]) for row in (head, *body)]) for i in range(len(head))]
    lines = [printable(title)] if title else []
    for row in (head, *body):
        cells = []
        for i, (cell, width) in enumerate(zip(row, widths, strict=True)):
            pad = " " * (width - text_columns(cell))
            cells.append(pad + cell if columns[i] in _NUMERIC else cell + pad)
        lines.append("  ".join(cells).rstrip())
    click.echo("\n".join(lines))


_NUMERIC = {"version", "latest", "rows", "files", "size", "#", "nulls", "distinct", "bytes", "users"}
_WHOLE = _NUMERIC | {"created (UTC)", "updated", "format", "operation", "status", "nullable"}


def cell_text(value: object) -> str:
    """User text for a Rich table: control characters (ESC sequences, newlines) shown as escapes, and
    Rich markup escaped (type names like timestamp[us, tz=UTC] and descriptions like "[bold]x")."""
    from rich.markup import escape

    return escape(printable(value))


def number_text(v: object) -> str:
    """A value for a table cell, floats to ``SIGNIFICANT_DIGITS`` significant digits (``0.333333``,
    ``1.23457e+06``, ``nan``); anything else as ``str`` (``-`` for None). JSON has the full value."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{SIGNIFICANT_DIGITS}g}"
    return str(v)


def time_text(t: datetime) -> str:
    """An instant as the CLI prints it: ISO 8601 in UTC to the second (``2026-04-01T12:34:56Z``), text
    ``dal.open`` and ``--version`` take back as a time (the instant cut to its second)."""
    from dal.catalog.types import as_utc

    return as_utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def short_text(v: object) -> str:
    """A value cut to 40 characters for a table cell (``-`` for None; floats as ``number_text``)."""
    text = number_text(v)
    return text if len(text) <= 40 else text[:37] + "..."
