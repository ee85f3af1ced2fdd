"""What a version holds and where it came from: head (first rows), stats (per-column, from file footers),
lineage (upstream, program, downstream)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from dal.cli.base import existing_catalog_of, json_option, output_option, version_option
from dal.cli.complete import complete_names, complete_versions
from dal.cli.output import emit_json, number_text, output_format, print_empty, print_table, short_text, size_text
from dal.errors import printable


@click.command("lineage")
@click.argument("name", shell_complete=complete_names)
@click.argument("version", required=False, shell_complete=complete_versions)
@click.option("--depth", default=1, show_default=True, type=click.IntRange(1, 20), help="Downstream levels.")
@json_option
@click.pass_context
def lineage_cmd(ctx: click.Context, name: str, version: str | None, depth: int, as_json: bool) -> None:
    """Show what built a version (upstream, program, git commit, Spark app) and what was built from it."""
    from dal import lineage

    out = lineage.lineage(existing_catalog_of(ctx), name, version, depth=depth)
    if as_json:
        emit_json(out)
        return
    click.echo(f"{name} @ version {out['version']}")
    _print_written_by(out)
    click.echo("upstream:" + ("" if out["upstream"] else " none"))
    for u in out["upstream"]:
        where = f" where {u['filters']}" if u.get("filters") else ""
        was = f" (read as {u['recorded_as']})" if u.get("recorded_as") else ""
        click.echo(printable(f"  {u['dataset']} @ {u['version']}{where}{was}  [{u.get('how') or 'inferred'}]"))
    click.echo("downstream:" + ("" if out["downstream"] else " none"))
    _print_tree(out["downstream"], "  ")
    if out["upstream"] or out["downstream"]:
        click.echo(
            "declared: named by the writer (dal.write inputs=); inferred: read by its process since its previous write"
        )


def _print_written_by(out: dict[str, Any]) -> None:
    """The ``written by / at / dal / program / git / spark`` lines of ``dal lineage`` (only those recorded)."""
    git = out.get("git") or {}
    spark = out.get("spark") or {}
    for label, value in (
        ("written by", f"{out.get('user') or '?'}@{out.get('host') or '?'}" if out.get("time") else None),
        ("at", out.get("time")),
        ("dal", out.get("dal_version")),
        ("program", out.get("program")),
        ("git", f"{git.get('commit')}" + (" (dirty)" if git.get("dirty") else "") if git else None),
        ("spark", f"{spark.get('application_id')} on {spark.get('master')}" if spark else None),
    ):
        if value:
            click.echo(printable(f"  {label}: {value}"))
    if not out.get("time"):
        click.echo("  no lineage recorded (not written by dal.write)")


def _print_tree(nodes: Sequence[dict[str, Any]], indent: str) -> None:
    for d in nodes:
        if d.get("truncated"):
            click.echo(f"{indent}... (only the first {d.get('shown')} are listed)")
            continue
        click.echo(printable(f"{indent}{d['dataset']} @ {d['version']}  [{d.get('how') or 'inferred'}]"))
        _print_tree(d.get("downstream") or [], indent + "  ")


@click.command("head")
@click.argument("name", shell_complete=complete_names)
@version_option
@click.option("-n", "rows", default=10, show_default=True, type=click.IntRange(0, 10_000), help="Rows to print.")
@click.option("--columns", default=None, help="Comma-separated columns (default: all).")
@click.option("--where", default=None, help="A filter, e.g. \"station = 'KTLX' AND date >= '2026-03-01'\".")
@json_option
@output_option
@click.pass_context
def head_cmd(
    ctx: click.Context,
    name: str,
    version: str | None,
    rows: int,
    columns: str | None,
    where: str | None,
    as_json: bool,
    output: str | None,
) -> None:
    """Print the first rows of a version (tensor fields as dtype[shape])."""
    from dal.ops import lifecycle

    out = output_format(as_json, output)
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    v, records = lifecycle.head(name, version, n=rows, columns=cols, where=where, catalog=existing_catalog_of(ctx))
    if out == "json":
        emit_json({"dataset": name, "version": v.number, "rows": records})
        return
    title = f"{name} @ version {v.number}"
    print_rows(
        title, records, cols or [f.name for f in v.schema], f"{title}: no rows" + (" match" if where else ""), out
    )


def print_rows(title: str, records: list[dict[str, Any]], empty_columns: list[str], empty_title: str, out: str) -> None:
    """Rows as a table under ``title``; with none, the columns they would have had under ``empty_title``."""
    if not records:
        print_empty(empty_columns, empty_title, out)
        return
    names = list(records[0])
    print_table(title, names, [[r[c] for c in names] for r in records], out)


@click.command("changes")
@click.argument("name", shell_complete=complete_names)
@version_option
@click.option("--since", required=True, type=click.IntRange(0), help="The version to start after (exclusive).")
@click.option("-n", "rows", default=10, show_default=True, type=click.IntRange(0, 10_000), help="Rows to print.")
@click.option("--columns", default=None, help="Comma-separated columns (default: all, then the change columns).")
@click.option("--where", default=None, help="A filter, e.g. \"_change_type = 'delete'\".")
@json_option
@output_option
@click.pass_context
def changes_cmd(
    ctx: click.Context,
    name: str,
    version: str | None,
    since: int,
    rows: int,
    columns: str | None,
    where: str | None,
    as_json: bool,
    output: str | None,
) -> None:
    """Print the rows the versions after --since (up to --version, default the latest) inserted and deleted,
    with _change_type, _commit_version and _commit_timestamp (dal.open(name, version).changes(since=...))."""
    from dal.ops.changes import changes

    out = output_format(as_json, output)
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    v, total, records = changes(
        name, version, since=since, n=rows, columns=cols, where=where, catalog=existing_catalog_of(ctx)
    )
    title = f"{name}: versions {since} (excluded) to {v.number}, {total} change rows"
    if out == "json":
        emit_json({"dataset": name, "since": since, "version": v.number, "total": total, "rows": records})
        return
    print_rows(
        title, records, cols or [f.name for f in v.schema], f"{title}: nothing changed" if not where else title, out
    )


@click.command("stats")
@click.argument("name", shell_complete=complete_names)
@version_option
@json_option
@output_option
@click.pass_context
def stats_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool, output: str | None) -> None:
    """Per-column statistics of a version from file footers (rows, nulls, min, max; distinct for partitions).

    Floats print to 6 significant digits (--json: in full)."""
    from dal.ops import lifecycle

    out = output_format(as_json, output)
    st = lifecycle.stats(name, version, catalog=existing_catalog_of(ctx))
    if out == "json":
        emit_json(st.to_dict())
        return
    approx = "" if st.exact else " (deletion vectors: null counts are upper bounds)"
    if approx and out == "tsv":  # no title line in tsv: the caveat goes to stderr
        click.echo(f"dal: {name} @ version {st.version}:{approx}", err=True)
    # a long text min or max is cut in a terminal's table (it would fill it), whole in the other layouts
    bound = short_text if out == "table" else number_text
    print_table(
        f"{name} @ version {st.version}: {st.rows:,} rows, {st.files} files, {size_text(st.size_bytes)}{approx}",
        ["column", "type", "nulls", "min", "max", "distinct"],
        [
            (
                c.name,
                c.type,
                "?" if c.nulls is None else f"{c.nulls:,}",
                bound(c.min),
                bound(c.max),
                "" if c.distinct is None else c.distinct,
            )
            for c in st.columns
        ],
        out,
    )


#: The commands this module adds to ``dal`` (dal.cli.app registers them).
COMMANDS: tuple[click.Command, ...] = (head_cmd, changes_cmd, stats_cmd, lineage_cmd)
