"""The ``dal`` command line: browse the catalog (ls, show, versions, schema, diff, partitions), tag, migrate.

User mistakes (unknown dataset or version, bad name, unreachable catalog) print one line and exit 1.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from catalog import Catalog, VersionInfo
from catalog.engine import default_url, display_url
from dal import views
from dal.errors import DalError, is_foreign, one_line, printable, translate
from dal.io import mask_url
from dal.views import dataset_dict as _dataset_dict
from dal.views import size_text as _size

EXIT_USER_ERROR = 1
EXIT_BUG = 70  # EX_SOFTWARE: dal itself failed
ENV_DEBUG = "DAL_DEBUG"
QUIET_LOGGERS = ("thrift", "hive_metastore_client", "py4j")


class _Group(click.Group):
    """Turns every error into one line on stderr instead of a traceback.

    dal's own errors, and errors of the libraries and storage it calls (pyarrow, delta-rs, OSError…), are
    ``dal: error: …`` and exit 1. Anything else is a bug in dal: one ``dal: internal error: …`` line asking
    for a report, exit 70, and the traceback only with ``DAL_DEBUG=1``.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except DalError as e:
            click.echo(f"dal: error: {one_line(e)}", err=True)
            ctx.exit(EXIT_USER_ERROR)
        except Exception as e:
            if is_foreign(e):
                click.echo(f"dal: error: {one_line(translate(e, 'dal ' + (ctx.invoked_subcommand or '')))}", err=True)
                ctx.exit(EXIT_USER_ERROR)
            if os.environ.get(ENV_DEBUG):
                raise
            click.echo(
                f"dal: internal error: {one_line(f'{type(e).__name__}: {e}')} (a bug in dal: please report it "
                f"with the command that caused it; {ENV_DEBUG}=1 shows the traceback)",
                err=True,
            )
            ctx.exit(EXIT_BUG)


class _State:
    def __init__(self, url: str | None) -> None:
        self.url = url or default_url()
        self._catalog: Catalog | None = None

    def catalog(self, *, create: bool = True) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.url, create=create)
        return self._catalog


def _catalog(ctx: click.Context) -> Catalog:
    return ctx.ensure_object(_State).catalog()


def _console() -> Console:
    return Console(soft_wrap=False, width=max(Console().width, 100))


def _emit_json(obj: Any) -> None:
    click.echo(views.to_json(obj))


def _table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    table = Table(title=_text(title) if title else None, show_lines=False, header_style="bold")
    for c in columns:
        table.add_column(c, justify="right" if c in {"version", "rows", "files", "size", "#"} else "left")
    for r in rows:
        table.add_row(*("" if v is None else _text(v) for v in r))
    _console().print(table)


def _text(value: object) -> str:
    """User text for a Rich table: control characters (ESC sequences, newlines) shown as escapes, and
    Rich markup escaped (type names like timestamp[us, tz=UTC] and descriptions like "[bold]x")."""
    return escape(printable(value))


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
version_option = click.option(
    "--version", "-v", "version", default=None, help="Version number, tag, or ISO timestamp (default: latest)."
)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--catalog",
    "catalog_url",
    envvar="DAL_CATALOG_URL",
    default=None,
    help="Catalog URL (SQLAlchemy); default $DAL_CATALOG_URL or the embedded SQLite catalog.",
)
@click.version_option(package_name="dal", prog_name="dal")
@click.pass_context
def cli(ctx: click.Context, catalog_url: str | None) -> None:
    """Browse and manage the dal dataset catalog."""
    # libraries that log a failure before raising it (thrift: "Could not connect to …") would add a second
    # line to the one dal prints for it
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    ctx.obj = _State(catalog_url)


@cli.command("ls")
@click.argument("pattern", required=False)
@json_option
@click.pass_context
def ls_cmd(ctx: click.Context, pattern: str | None, as_json: bool) -> None:
    """List datasets; PATTERN is a glob on names (weather.*) or a substring of name or description."""
    datasets = _catalog(ctx).list_datasets(pattern)
    if as_json:
        _emit_json([_dataset_dict(d) for d in datasets])
        return
    if not datasets:
        click.echo("no datasets" + (f" match {pattern!r}" if pattern else " yet"))
        return
    _table(
        None,
        ["name", "format", "latest", "updated", "description"],
        [
            (
                d.name,
                d.format,
                "-" if d.latest_version is None else d.latest_version,
                d.updated_at.strftime("%Y-%m-%d %H:%M"),
                d.description,
            )
            for d in datasets
        ],
    )


@cli.command("show")
@click.argument("name")
@json_option
@click.pass_context
def show_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a dataset: location, owner, time column and its newest version."""
    cat = _catalog(ctx)
    if as_json:
        _emit_json(views.show(cat, name))
        return
    ds = cat.get_dataset(name)
    latest = cat.version(name) if ds.latest_version is not None else None
    rows: list[tuple[str, object]] = [
        ("name", ds.name),
        ("format", ds.format),
        ("location", mask_url(ds.location)),
        ("description", ds.description or "-"),
        ("owner", ds.owner or "-"),
        ("time column", ds.time_column or "-"),
        ("created", ds.created_at.isoformat(timespec="seconds")),
        ("updated", ds.updated_at.isoformat(timespec="seconds")),
    ]
    if latest is None:
        rows.append(("versions", "none yet"))
    else:
        rows += [
            ("latest version", latest.number),
            ("rows", f"{latest.row_count:,}"),
            ("files", latest.file_count),
            ("size", _size(latest.size_bytes)),
            ("columns", len(latest.schema)),
            ("partitioned by", ", ".join(latest.partition_columns) or "-"),
            ("tags", ", ".join(latest.tags) or "-"),
        ]
    _table(None, ["field", "value"], rows)


def _version_rows(versions: Sequence[VersionInfo]) -> list[tuple[object, ...]]:
    return [
        (
            v.number,
            v.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            v.operation,
            f"{v.row_count:,}",
            v.file_count,
            _size(v.size_bytes),
            "-" if v.storage_version is None else v.storage_version,
            ", ".join(v.tags),
        )
        for v in versions
    ]


@cli.command("versions")
@click.argument("name")
@json_option
@click.pass_context
def versions_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """List the versions of a dataset, oldest first."""
    if as_json:
        _emit_json(views.versions(_catalog(ctx), name))
        return
    versions = _catalog(ctx).versions(name)
    if not versions:
        click.echo(f"{name} has no versions yet")
        return
    _table(
        name,
        ["version", "created (UTC)", "operation", "rows", "files", "size", "storage v.", "tags"],
        _version_rows(versions),
    )


@cli.command("schema")
@click.argument("name")
@version_option
@json_option
@click.pass_context
def schema_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool) -> None:
    """Show the schema of one version (tensor fields with dtype, shape and codec)."""
    if as_json:
        _emit_json(views.schema(_catalog(ctx), name, version))
        return
    v = _catalog(ctx).version(name, version)
    _table(
        f"{name} @ version {v.number}",
        ["#", "column", "type", "nullable", "tensor"],
        [
            (
                i,
                f.name + (" (partition)" if f.name in v.partition_columns else ""),
                f.type,
                "yes" if f.nullable else "no",
                f.describe() if f.is_tensor else "",
            )
            for i, f in enumerate(v.schema)
        ],
    )


@cli.command("diff")
@click.argument("name")
@click.argument("old")
@click.argument("new")
@json_option
@click.pass_context
def diff_cmd(ctx: click.Context, name: str, old: str, new: str, as_json: bool) -> None:
    """Compare the schemas of two versions (numbers, tags or timestamps)."""
    cat = _catalog(ctx)
    if as_json:
        _emit_json(views.diff(cat, name, old, new))
        return
    d = cat.diff(name, old, new)
    a, b = cat.version(name, old), cat.version(name, new)
    rows: list[tuple[object, ...]] = [("+", f.name, "", f.describe()) for f in d.added]
    rows += [("-", f.name, f.describe(), "") for f in d.removed]
    rows += [("~", c.name, _field_text(c.old), _field_text(c.new)) for c in d.changed]
    if rows:
        _table(f"{name}: schema {d.old_version} -> {d.new_version}", ["", "column", "old", "new"], rows)
    else:
        click.echo(f"{name}: schema unchanged from version {d.old_version} to {d.new_version}")
    click.echo(f"rows: {a.row_count:,} -> {b.row_count:,} ({b.row_count - a.row_count:+,})")


def _field_text(f: Any) -> str:
    return f"{f.describe()}{'' if f.nullable else ' not null'}"


@cli.command("partitions")
@click.argument("name")
@version_option
@json_option
@click.pass_context
def partitions_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool) -> None:
    """List the partitions present in one version, with row counts."""
    cat = _catalog(ctx)
    if as_json:
        _emit_json(views.partitions(cat, name, version))
        return
    v = cat.version(name, version)
    parts = cat.partitions(name, v.number)
    if not v.partition_columns:
        click.echo(f"{name} @ version {v.number} is not partitioned ({v.row_count:,} rows)")
        return
    _table(
        f"{name} @ version {v.number} by {', '.join(v.partition_columns)}",
        ["partition", "rows", "files", "size"],
        [(p.key, f"{p.row_count:,}", p.file_count, _size(p.size_bytes)) for p in parts],
    )


@cli.command("tag")
@click.argument("name")
@click.argument("version")
@click.argument("tag")
@click.option("--force", is_flag=True, help="Move the tag if it is on another version.")
@json_option
@click.pass_context
def tag_cmd(ctx: click.Context, name: str, version: str, tag: str, force: bool, as_json: bool) -> None:
    """Tag a version (e.g. dal tag weather.radar 3 prod)."""
    v = _catalog(ctx).tag(name, version, tag, force=force)
    if as_json:
        _emit_json(v.to_dict())
    else:
        click.echo(f"{name}: tagged version {v.number} as {tag!r} (tags: {', '.join(v.tags)})")


@cli.command("untag")
@click.argument("name")
@click.argument("tag")
@click.pass_context
def untag_cmd(ctx: click.Context, name: str, tag: str) -> None:
    """Remove a tag from a dataset."""
    _catalog(ctx).untag(name, tag)
    click.echo(f"{name}: removed tag {tag!r}")


@cli.command("register")
@click.argument("name")
@click.argument("uri")
@click.option("--format", "fmt", default="delta", show_default=True, help="Storage format of the table.")
@click.option("--description", default="", help="What the dataset holds.")
@click.option("--time-column", default=None, help="The column that orders rows in time.")
@json_option
@click.pass_context
def register_cmd(
    ctx: click.Context, name: str, uri: str, fmt: str, description: str, time_column: str | None, as_json: bool
) -> None:
    """Adopt an existing table: every one of its versions becomes a catalog version."""
    from dal.api import register

    versions = register(name, uri, format=fmt, description=description, time_column=time_column, catalog=_catalog(ctx))
    if as_json:
        _emit_json([v.to_dict() for v in versions])
    else:
        click.echo(f"registered {name} with {len(versions)} version(s)")


@cli.command("sync")
@click.argument("name")
@json_option
@click.pass_context
def sync_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """Record versions that other tools committed to the dataset's table since the catalog last looked."""
    from dal.api import sync

    versions = sync(name, catalog=_catalog(ctx))
    if as_json:
        _emit_json([v.to_dict() for v in versions])
    elif versions:
        click.echo(f"{name}: recorded {len(versions)} new version(s) ({versions[0].number}..{versions[-1].number})")
    else:
        click.echo(f"{name}: up to date")


@cli.group("hive", cls=_Group)
def hive_group() -> None:
    """Publish datasets to a Hive Metastore, or adopt Hive tables."""


@hive_group.command("sync")
@click.argument("names", nargs=-1)
@click.option("--uri", required=True, envvar="DAL_HIVE_URI", help="thrift://host:9083")
@click.option("--version", "-v", "version", default=None, help="Version to publish (default: latest).")
@json_option
@click.pass_context
def hive_sync_cmd(ctx: click.Context, names: tuple[str, ...], uri: str, version: str | None, as_json: bool) -> None:
    """Create or update an external Hive table per dataset (all datasets when no NAME is given)."""
    from dal import hive

    tables = hive.sync(list(names) or None, uri=uri, version=version, catalog=_catalog(ctx))
    if as_json:
        _emit_json([t.__dict__ for t in tables])
        return
    for t in tables:
        line = f"{t.dataset} v{t.version} -> {t.database}.{t.table} ({t.partitions} partitions) at {t.location}"
        click.echo(printable(mask_url(line)))


@hive_group.command("import")
@click.argument("qualified")
@click.option("--uri", required=True, envvar="DAL_HIVE_URI", help="thrift://host:9083")
@click.option("--name", default=None, help="Dataset name in the catalog (default: DB.TABLE).")
@click.pass_context
def hive_import_cmd(ctx: click.Context, qualified: str, uri: str, name: str | None) -> None:
    """Register an existing Hive table (Delta, Petastorm or Parquet location) as a dataset."""
    from dal import hive

    versions = hive.import_table(qualified, uri=uri, name=name, catalog=_catalog(ctx))
    click.echo(printable(f"imported {qualified} as {versions[0].dataset} with {len(versions)} version(s)"))


@cli.group("db", cls=_Group)
def db_group() -> None:
    """Manage the catalog database itself."""


@db_group.command("upgrade")
@click.pass_context
def db_upgrade_cmd(ctx: click.Context) -> None:
    """Create the catalog or upgrade it to this dal's schema revision."""
    state = ctx.ensure_object(_State)
    before, after = state.catalog(create=False).upgrade()
    where = display_url(state.url)
    if before == after:
        click.echo(f"catalog {where} is up to date (revision {after})")
    else:
        click.echo(f"catalog {where} upgraded from revision {before or 'none'} to {after}")


@db_group.command("status")
@json_option
@click.pass_context
def db_status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Show the catalog URL (password hidden) and its schema revision."""
    from catalog import migrate

    state = ctx.ensure_object(_State)
    cat = state.catalog(create=False)
    current = cat.revision()
    head = migrate.head_revision()
    info = {"url": display_url(state.url), "revision": current, "head": head, "up_to_date": current == head}
    if as_json:
        _emit_json(info)
    else:
        if current is None:
            status = f"not created yet (created on first use, or by `{migrate.UPGRADE_COMMAND}`)"
        else:
            status = "up to date" if current == head else f"needs `{migrate.UPGRADE_COMMAND}`"
        click.echo(f"catalog {info['url']}: revision {current or 'none'} (head {head}), {status}")


@cli.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--token", envvar="DAL_UI_TOKEN", default=None, help="Require this bearer token ($DAL_UI_TOKEN).")
@click.pass_context
def ui_cmd(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Serve a read-only web page and JSON API over the catalog (needs dal[ui])."""
    from dal.ui import serve

    serve(_catalog(ctx), host=host, port=port, token=token)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    # delta-rs logs the cloud SDK's credential-chain warnings (many lines each) to stderr via env_logger;
    # the CLI reports the failure itself in one line, so only errors are logged unless RUST_LOG says otherwise
    os.environ.setdefault("RUST_LOG", "error")
    cli.main(args=list(argv) if argv is not None else None, prog_name="dal")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
