"""The ``dal`` command line: browse the catalog (ls, show, versions, schema, diff, partitions, head, stats, lineage),
tag, manage datasets (drop, rename, set, gc), migrate.

User mistakes (unknown dataset or version, bad name, unreachable catalog) print one line and exit 1; with
``--json`` they are a JSON object ``{"error", "type", "exit_code"}`` on stderr. Shell completion:
``eval "$(_DAL_COMPLETE=bash_source dal)"`` (zsh_source, fish_source for other shells).

Long operations (register, sync, gc, hive sync) draw a progress line on stderr when it is a terminal
(``dal.progress``); ``--quiet`` / ``-q`` (before or after the command) or ``DAL_PROGRESS=0`` turns it off.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem

from catalog.home import default_url
from catalog.urls import mask_url
from dal import progress
from dal._version import __version__
from dal.errors import DalError, is_foreign, one_line, printable, translate
from dal.formats.names import DEFAULT_FORMAT
from dal.ops import views
from dal.ops.views import dataset_dict as _dataset_dict
from dal.ops.views import size_text as _size

if TYPE_CHECKING:
    from rich.console import Console

    from catalog import Catalog, VersionInfo
    from catalog.lite import CatalogReader, LiteCatalog

# Start-up: ``dal --help``, ``dal ls``, ``dal show``, ``dal versions`` and shell completion import neither
# SQLAlchemy, alembic, pyarrow, pandas nor rich's tables until a command needs them (tests/cli/test_startup.py);
# the browsing commands read an up-to-date catalog through catalog.lite (the DB-API driver only).

EXIT_USER_ERROR = 1
EXIT_BUG = 70  # EX_SOFTWARE: dal itself failed
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
ENV_DEBUG = "DAL_DEBUG"
QUIET_LOGGERS = ("thrift", "hive_metastore_client", "py4j")
_QUIET = "No progress line on stderr (progress is drawn only on a terminal; also DAL_PROGRESS=0)."


class _Group(click.Group):
    """Turns every error into one line on stderr instead of a traceback.

    dal's own errors, and errors of the libraries and storage it calls (pyarrow, delta-rs, OSError…), are
    ``dal: error: …`` and exit 1. Anything else is a bug in dal: one ``dal: internal error: …`` line asking
    for a report, exit 70, and the traceback only with ``DAL_DEBUG=1``.
    """

    def invoke(self, ctx: click.Context) -> Any:
        if _wants_json(ctx):  # before click hands the words to the subcommand (and clears them here)
            ctx.meta["dal.json"] = True
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:  # Ctrl-C: one line and the shell's 128 + SIGINT, not click's "Aborted!" and 1
            if _wants_json(ctx):
                _json_error(ctx, "interrupted", "KeyboardInterrupt", EXIT_INTERRUPTED)
            click.echo("dal: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except click.exceptions.ClickException as e:
            if not _wants_json(ctx):
                raise
            _json_error(ctx, e.format_message(), "usage" if isinstance(e, click.UsageError) else "error", e.exit_code)
        except DalError as e:
            if _wants_json(ctx):
                _json_error(ctx, one_line(e), type(e).__name__, EXIT_USER_ERROR)
            click.echo(f"dal: error: {one_line(e)}", err=True)
            ctx.exit(EXIT_USER_ERROR)
        except Exception as e:
            if is_foreign(e):
                err = translate(e, "dal " + (ctx.invoked_subcommand or ""))
                if _wants_json(ctx):
                    _json_error(ctx, one_line(err), type(err).__name__, EXIT_USER_ERROR)
                click.echo(f"dal: error: {one_line(err)}", err=True)
                ctx.exit(EXIT_USER_ERROR)
            if os.environ.get(ENV_DEBUG):
                raise
            message = (
                f"{one_line(f'{type(e).__name__}: {e}')} (a bug in dal: please report it "
                f"with the command that caused it; {ENV_DEBUG}=1 shows the traceback)"
            )
            if _wants_json(ctx):
                _json_error(ctx, message, "InternalError", EXIT_BUG)
            click.echo(f"dal: internal error: {message}", err=True)
            ctx.exit(EXIT_BUG)


def _wants_json(ctx: click.Context) -> bool:
    """Whether the command line asked for --json (errors then are a JSON object on stderr)."""
    if ctx.meta.get("dal.json"):
        return True
    words = [*getattr(ctx, "_protected_args", ()), *ctx.args]
    return "--json" in words[: words.index("--")] if "--" in words else "--json" in words


def _json_error(ctx: click.Context, message: str, kind: str, code: int) -> None:
    """``{"error": …, "type": …, "exit_code": …}`` on stderr, then exit ``code``."""
    click.echo(json.dumps({"error": message, "type": kind, "exit_code": code}), err=True)
    ctx.exit(code)


class _State:
    def __init__(self, url: str | None) -> None:
        self.url = url or default_url()  # the --profile option has resolved a profile's URL already
        self._catalog: Catalog | None = None
        self._lite: LiteCatalog | None = None
        self._lite_tried = False

    def catalog(self, *, create: bool = True, must_exist: bool = False) -> Catalog:
        """The full catalog; ``must_exist`` for read-only commands (a missing SQLite file is an error, not a
        new catalog: a mistyped --catalog must not create folders and an empty catalog)."""
        if self._catalog is None:
            from catalog import Catalog

            self._catalog = Catalog(self.url, create=create, must_exist=must_exist)
        return self._catalog

    def reader(self) -> CatalogReader:
        """The quick read-only reader when it can serve this catalog (catalog.lite), else the full Catalog."""
        if not self._lite_tried:
            self._lite_tried = True
            from catalog import lite

            self._lite = lite.connect(self.url)
        return self._lite if self._lite is not None else self.catalog(must_exist=True)

    def close(self) -> None:
        if self._lite is not None:
            self._lite.close()


def _catalog(ctx: click.Context) -> Catalog:
    return ctx.ensure_object(_State).catalog()


def _read_catalog(ctx: click.Context) -> Catalog:
    """The full catalog for a read-only command: never created by it (see ``_State.catalog``)."""
    return ctx.ensure_object(_State).catalog(must_exist=True)


def _reader(ctx: click.Context) -> CatalogReader:
    return ctx.ensure_object(_State).reader()


def _console() -> Console:
    """Tables as wide as the terminal (80 columns off a terminal, or $COLUMNS): long values fold onto more lines."""
    from rich.console import Console

    return Console(soft_wrap=False)


def _emit_json(obj: Any) -> None:
    click.echo(views.to_json(obj))


def _table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    from rich.table import Table

    table = Table(title=_text(title) if title else None, show_lines=False, header_style="bold")
    for c in columns:
        # fold, never cut: a name or path is still all there (on more lines) in a narrow terminal; short values
        # (numbers, times) stay whole on one line and the wider text columns give way
        table.add_column(c, justify="right" if c in _NUMERIC else "left", overflow="fold", no_wrap=c in _WHOLE)
    for r in rows:
        table.add_row(*("" if v is None else _text(v) for v in r))
    _console().print(table)


_NUMERIC = {"version", "latest", "rows", "files", "size", "#"}
_WHOLE = _NUMERIC | {"created (UTC)", "updated", "format", "operation", "status", "nullable"}


def _text(value: object) -> str:
    """User text for a Rich table: control characters (ESC sequences, newlines) shown as escapes, and
    Rich markup escaped (type names like timestamp[us, tz=UTC] and descriptions like "[bold]x")."""
    from rich.markup import escape

    return escape(printable(value))


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta["dal.json"] = True
    return value


json_option = click.option(
    "--json", "as_json", is_flag=True, callback=_remember_json, help="Print JSON (errors: a JSON object on stderr)."
)
version_option = click.option(
    "--version",
    "-v",
    "version",
    default=None,
    help="Version number, tag, or ISO timestamp (default: latest).",
    shell_complete=lambda ctx, param, incomplete: _complete_versions(ctx, param, incomplete),
)


LOG_LEVELS = ("debug", "info", "warning", "error")
_LOG_FORMAT = "dal: %(levelname)s: %(name)s: %(message)s"


def _log_to_stderr(level: str) -> Any:
    """dal's loggers (``dal``, ``dal.catalog``, …) at ``level`` onto stderr for this command; returns the undo
    (in-process callers such as tests get the logger back as it was)."""
    logger = logging.getLogger("dal")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(level.upper())

    def undo() -> None:
        logger.removeHandler(handler)
        logger.setLevel(before)

    return undo


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--catalog",
    "catalog_url",
    envvar="DAL_CATALOG_URL",
    default=None,
    help="Catalog URL (SQLAlchemy); default $DAL_CATALOG_URL or the embedded SQLite catalog.",
)
@click.option(
    "--profile",
    envvar="DAL_PROFILE",
    default=None,
    help="A named catalog from the config file ($DAL_CONFIG or ~/.config/dal/config.toml; $DAL_PROFILE).",
)
@click.option("--quiet", "-q", is_flag=True, help=_QUIET)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    envvar="DAL_LOG_LEVEL",
    default=None,
    help="Print dal's log messages of this level and above on stderr ($DAL_LOG_LEVEL; default: warnings only).",
)
@click.option("--verbose", "-v", count=True, help="Log more on stderr: -v is --log-level info, -vv debug.")
@click.version_option(version=__version__, prog_name="dal", message="%(prog)s, version %(version)s")
@click.pass_context
def cli(
    ctx: click.Context,
    catalog_url: str | None,
    profile: str | None,
    quiet: bool,
    log_level: str | None,
    verbose: int,
) -> None:
    """Browse and manage the dal dataset catalog."""
    level = log_level or ("debug" if verbose >= 2 else "info" if verbose else None)
    if level is not None:
        ctx.call_on_close(_log_to_stderr(level))
    before = progress.get_enabled()
    progress.set_enabled(False if quiet else None)  # a command's own --quiet may still turn it off
    ctx.call_on_close(lambda: progress.set_enabled(before))  # in-process callers (tests) get theirs back
    # libraries that log a failure before raising it (thrift: "Could not connect to …") would add a second
    # line to the one dal prints for it
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    ctx.obj = _State(_catalog_choice(ctx, catalog_url, profile))
    ctx.call_on_close(ctx.obj.close)


def _catalog_choice(ctx: click.Context, url: str | None, profile: str | None) -> str | None:
    """The catalog URL: --catalog, else --profile, else $DAL_CATALOG_URL, else $DAL_PROFILE, else the config
    file's default profile, else the embedded catalog (``catalog.home.default_url``)."""
    from click.core import ParameterSource

    def typed(name: str) -> bool:
        return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE

    if url and typed("catalog_url"):
        return url
    if profile and typed("profile"):
        from catalog.home import profile_url

        return profile_url(profile)
    return url or None  # $DAL_CATALOG_URL; else default_url() reads $DAL_PROFILE and the config file


LS_LIMIT = 1000
limit_option = click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=LS_LIMIT,
    show_default=True,
    help="At most this many, the first by name (0: all; a catalog can hold tens of thousands).",
)


def _complete_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Dataset names starting with what was typed (``dal show weather.<TAB>``), from the catalog. With many
    matches, one candidate per next dotted part (``team07.``) so the shell does not list thousands."""
    try:
        reader = _completion_reader(ctx)
        if reader is None:
            return []
        try:
            names = reader.dataset_names(incomplete, limit=COMPLETION_LIMIT + 1)
        finally:
            reader.close()
    except Exception:  # completion must never print a traceback into the shell
        return []
    if len(names) > COMPLETION_LIMIT:
        parts = dict.fromkeys(_next_part(n, incomplete) for n in names)
        return [CompletionItem(p) for p in parts]
    return [CompletionItem(n) for n in names]


def _next_part(name: str, typed: str) -> str:
    dot = name.find(".", len(typed))
    return name if dot < 0 else name[: dot + 1]


def _complete_versions(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The dataset's tags (with the version each names) and ``latest``; version numbers once a digit is typed."""
    name = ctx.params.get("name") or _typed_name(ctx)
    if not isinstance(name, str):
        return []
    try:
        reader = _completion_reader(ctx)
        if reader is None:
            return []
        try:
            tags = reader.tag_names(name)
            latest = None
            if incomplete[:1].isdigit():
                found = reader.dataset_names(name, limit=1)
                latest = reader.get_dataset(name).latest_version if found == [name] else None
        finally:
            reader.close()
    except Exception:  # completion must never print a traceback into the shell
        return []
    items = [CompletionItem(t, help=f"version {n}") for t, n in tags.items() if t.startswith(incomplete)]
    if "latest".startswith(incomplete):
        items.append(CompletionItem("latest", help="the newest version"))
    if latest is not None:
        numbers = [str(n) for n in range(latest, -1, -1) if str(n).startswith(incomplete)]
        items += [CompletionItem(n) for n in numbers[:COMPLETION_LIMIT]]
    return items


def _typed_name(ctx: click.Context) -> str | None:
    """The NAME typed after the command, from the shell's words (click leaves it unparsed while it completes an
    option's value: ``dal schema weather.obs -v <TAB>``)."""
    import shlex

    try:
        words = shlex.split(os.environ.get("COMP_WORDS", ""))
    except ValueError:
        return None
    if ctx.info_name not in words:
        return None
    rest = words[words.index(ctx.info_name) + 1 :]
    return next((w for w in rest if not w.startswith("-")), None)


def _complete_tags(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [c for c in _complete_versions(ctx, _param, incomplete) if c.help and c.help.startswith("version ")]


def _completion_reader(ctx: click.Context) -> LiteCatalog | None:
    """The quick reader of the catalog the command line names (``--catalog`` or the default), or None: completion
    never creates, migrates or waits for a catalog."""
    from catalog import lite

    url = ctx.find_root().params.get("catalog_url") or default_url()
    return lite.connect(url)


COMPLETION_LIMIT = 200


@cli.command("ls")
@click.argument("pattern", required=False, shell_complete=_complete_names)
@limit_option
@json_option
@click.pass_context
def ls_cmd(ctx: click.Context, pattern: str | None, limit: int, as_json: bool) -> None:
    """List datasets; PATTERN is a glob on names (weather.*) or a substring of name or description."""
    reader = _reader(ctx)
    datasets = reader.list_datasets(pattern, limit=limit + 1) if limit else reader.list_datasets(pattern)
    more = bool(limit) and len(datasets) > limit
    datasets = datasets[:limit] if limit else datasets
    if more:
        click.echo(f"dal: listed the first {limit:,} datasets by name; more match (--limit N, or --limit 0: all)",
                   err=True)  # fmt: skip
    if as_json:
        # the row count and size of each one's latest version, as /api/datasets has them (one more query)
        sizes = reader.latest_sizes(pattern, limit=limit or None) if datasets else {}
        out = []
        for d in datasets:
            item = _dataset_dict(d)
            item["latest_row_count"], item["latest_size_bytes"] = sizes.get(d.name, (None, None))
            out.append(item)
        _emit_json(out)
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
@click.argument("name", shell_complete=_complete_names)
@click.option("--property", "prop", default=None, metavar="KEY", help="Print only this property's value.")
@json_option
@click.pass_context
def show_cmd(ctx: click.Context, name: str, prop: str | None, as_json: bool) -> None:
    """Show a dataset: location, owner, time column and its newest version (--property KEY: one property)."""
    cat = _reader(ctx)
    if prop is not None:
        value = _property(cat.get_dataset(name), prop)
        if as_json:
            _emit_json({"dataset": name, "property": prop, "value": value})
        else:
            click.echo(printable(value if isinstance(value, str) else json.dumps(value)))
        return
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


def _property(info: Any, key: str) -> Any:
    """One property of a dataset (``dal set --property`` sets them); a missing key names the ones there are."""
    from catalog.errors import NotFound, suggest

    if key not in info.properties:
        known = ", ".join(sorted(info.properties)) or "none"
        raise NotFound(f"{info.name} has no property {key!r}{suggest(key, info.properties)} (properties: {known})")
    return info.properties[key]


def _version_rows(versions: Sequence[VersionInfo]) -> list[tuple[object, ...]]:
    return [
        (
            v.number,
            v.created_at.strftime("%Y-%m-%d %H:%M"),
            v.operation,
            f"{v.row_count:,}",
            _size(v.size_bytes),
            ", ".join(v.tags),
            "expired" if v.unavailable else "",
        )
        for v in versions
    ]


@cli.command("versions")
@click.argument("name", shell_complete=_complete_names)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the newest N versions.")
@json_option
@click.pass_context
def versions_cmd(ctx: click.Context, name: str, limit: int | None, as_json: bool) -> None:
    """List the versions of a dataset, oldest first."""
    if as_json:
        _emit_json(views.versions(_reader(ctx), name, limit))
        return
    reader = _reader(ctx)
    versions = reader.versions(name) if limit is None else reader.versions(name, limit=limit)
    if not versions:
        click.echo(f"{name} has no versions yet")
        return
    _table(
        name,
        # files, storage versions and seconds: --json (80 columns hold these)
        ["version", "created (UTC)", "operation", "rows", "size", "tags", "status"],
        _version_rows(versions),
    )


@cli.command("schema")
@click.argument("name", shell_complete=_complete_names)
@version_option
@json_option
@click.pass_context
def schema_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool) -> None:
    """Show the schema of one version (tensor fields with dtype, shape and codec)."""
    if as_json:
        _emit_json(views.schema(_read_catalog(ctx), name, version))
        return
    v = _read_catalog(ctx).version(name, version)
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
@click.argument("name", shell_complete=_complete_names)
@click.argument("old", shell_complete=_complete_versions)
@click.argument("new", shell_complete=_complete_versions)
@json_option
@click.pass_context
def diff_cmd(ctx: click.Context, name: str, old: str, new: str, as_json: bool) -> None:
    """Compare the schemas of two versions (numbers, tags or timestamps)."""
    cat = _read_catalog(ctx)
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
@click.argument("name", shell_complete=_complete_names)
@version_option
@json_option
@click.pass_context
def partitions_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool) -> None:
    """List the partitions present in one version, with row counts."""
    cat = _read_catalog(ctx)
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


@cli.command("files")
@click.argument("name", shell_complete=_complete_names)
@click.argument("version", required=False, shell_complete=_complete_versions)
@json_option
@click.pass_context
def files_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool) -> None:
    """List the data files of a version (default: the latest): path, partition, rows, size."""
    from dal import api

    ds = api.open(name, version, catalog=_read_catalog(ctx))
    files = ds.files()
    root = mask_url(ds.location).rstrip("/") + "/"
    entries: list[dict[str, Any]] = [
        {
            "path": mask_url(f.uri),
            "partition": "/".join(f"{k}={'' if v is None else v}" for k, v in f.partition_values),
            "rows": f.row_count,
            "size_bytes": f.size_bytes,
            "deleted_rows": len(f.deleted_rows),
        }
        for f in files
    ]
    if as_json:
        _emit_json({"dataset": name, "version": ds.number, "location": mask_url(ds.location), "files": entries})
        return
    if not entries:
        click.echo(f"{name} @ version {ds.number}: no data files")
        return

    def short(path: str) -> str:
        plain = path.split("://", 1)[-1]
        base = root.split("://", 1)[-1]
        return plain[len(base) :] if plain.startswith(base) else path

    total = sum(f.size_bytes for f in files)
    _table(
        f"{name} @ version {ds.number}: {len(entries):,} files, {_size(total)} under {printable(mask_url(ds.location))}",
        ["file", "rows", "size"],
        [(short(e["path"]), "?" if e["rows"] is None else f"{e['rows']:,}", _size(e["size_bytes"])) for e in entries],
    )


@cli.command("profiles")
@json_option
def profiles_cmd(as_json: bool) -> None:
    """List the named catalogs of the config file (passwords masked; ${VAR} left as written)."""
    from catalog.home import config_path, default_profile, load_config, profiles

    config = load_config()
    found = profiles(config)
    default = default_profile(config)
    if as_json:
        _emit_json({"config": str(config_path()), "default": default,
                    "profiles": {n: mask_url(u) for n, u in found.items()}})  # fmt: skip
        return
    if not found:
        click.echo(f"no catalog profiles in {printable(str(config_path()))}")
        return
    _table(
        f"profiles in {config_path()}",
        ["profile", "catalog", ""],
        [(n, mask_url(u), "default" if n == default else "") for n, u in sorted(found.items())],
    )


@cli.command("tag")
@click.argument("name", shell_complete=_complete_names)
@click.argument("version", shell_complete=_complete_versions)
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
@click.argument("name", shell_complete=_complete_names)
@click.argument("tag", shell_complete=_complete_tags)
@json_option
@click.pass_context
def untag_cmd(ctx: click.Context, name: str, tag: str, as_json: bool) -> None:
    """Remove a tag from a dataset."""
    _catalog(ctx).untag(name, tag)
    if as_json:
        _emit_json({"dataset": name, "removed_tag": tag, "tags": _catalog(ctx).tags(name)})
    else:
        click.echo(f"{name}: removed tag {tag!r}")


@cli.command("register")
@click.argument("name")
@click.argument("uri")
@click.option("--format", "fmt", default=DEFAULT_FORMAT, show_default=True, help="Storage format of the table.")
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
@click.argument("name", shell_complete=_complete_names)
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


# -- lifecycle: drop, rename, set, head, stats, gc -------------------------------------------------------


def _properties(pairs: Sequence[str]) -> dict[str, Any]:
    """``k=v`` pairs; ``k=`` removes the property ``k``."""
    out: dict[str, Any] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{p!r} is not KEY=VALUE (KEY= removes KEY)", param_hint="--property")
        out[key] = value if value != "" else None
    return out


@cli.command("drop")
@click.argument("name", shell_complete=_complete_names)
@click.option("--purge", is_flag=True, help="Also delete the data dal wrote at the dataset's location.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="With --purge: delete dal's files even if other files are there (kept).")
@json_option
@click.pass_context
def drop_cmd(ctx: click.Context, name: str, purge: bool, yes: bool, force: bool, as_json: bool) -> None:
    """Remove a dataset (versions and tags) from the catalog; --purge also deletes its data."""
    from dal.ops import lifecycle

    cat = _catalog(ctx)
    info = cat.get_dataset(name)
    if not yes:
        if as_json or not sys.stdin.isatty():
            raise click.UsageError("dropping a dataset needs confirmation: pass --yes")
        what = "and DELETE its data files at " + mask_url(info.location) if purge else "from the catalog (data kept)"
        if purge:
            ours, foreign = lifecycle.purge_plan(name, catalog=cat)
            what += f" ({len(ours)} file(s); {len(foreign)} other file(s) left)" if force else f" ({len(ours)} file(s))"
        try:
            click.confirm(f"drop {name} {what}?", abort=True)
        except click.exceptions.Abort as e:  # click turns a Ctrl-C at its prompt into Abort ("Aborted!", 1)
            if isinstance(e.__context__, KeyboardInterrupt):
                if sys.stderr.isatty():  # end the prompt's line; the group prints `dal: interrupted`, exit 130
                    click.echo(err=True)
                raise KeyboardInterrupt from None
            raise
    result = lifecycle.drop(name, purge=purge, force=force, catalog=cat)
    if as_json:
        out = result.to_dict()
        out["location"] = mask_url(out["location"])
        _emit_json(out)
    elif purge:
        left = f"; left {len(result.left)} file(s) dal did not write" if result.left else ""
        click.echo(
            f"dropped {name}: deleted {len(result.deleted)} file(s) at {printable(mask_url(info.location))}{left}"
        )
    else:
        click.echo(f"dropped {name} from the catalog; its data is still at {printable(mask_url(info.location))}")


@cli.command("rename")
@click.argument("old", shell_complete=_complete_names)
@click.argument("new")
@json_option
@click.pass_context
def rename_cmd(ctx: click.Context, old: str, new: str, as_json: bool) -> None:
    """Rename a dataset (versions, tags and data stay where they are)."""
    from dal.ops import lifecycle

    info = lifecycle.rename(old, new, catalog=_catalog(ctx))
    if as_json:
        _emit_json(_dataset_dict(info))
    else:
        click.echo(f"renamed {old} to {new}")


@cli.command("set")
@click.argument("name", shell_complete=_complete_names)
@click.option("--description", default=None, help="What the dataset holds.")
@click.option("--owner", default=None, help="Who answers for it (a user or team).")
@click.option("--time-column", default=None, help="The column that orders rows in time.")
@click.option("--property", "props", multiple=True, metavar="KEY=VALUE", help="Set a property (KEY= removes it).")
@json_option
@click.pass_context
def set_cmd(
    ctx: click.Context,
    name: str,
    description: str | None,
    owner: str | None,
    time_column: str | None,
    props: tuple[str, ...],
    as_json: bool,
) -> None:
    """Change a dataset's description, owner, time column or properties."""
    from dal.ops import lifecycle

    properties = _properties(props)
    if description is None and owner is None and time_column is None and not properties:
        raise click.UsageError("nothing to set: give --description, --owner, --time-column or --property")
    info = lifecycle.set_info(name, description=description, owner=owner, time_column=time_column,
                              properties=properties or None, catalog=_catalog(ctx))  # fmt: skip
    if as_json:
        _emit_json(_dataset_dict(info))
    else:
        click.echo(f"updated {name}")


@cli.command("lineage")
@click.argument("name", shell_complete=_complete_names)
@click.argument("version", required=False, shell_complete=_complete_versions)
@click.option("--depth", default=1, show_default=True, type=click.IntRange(1, 20), help="Downstream levels.")
@json_option
@click.pass_context
def lineage_cmd(ctx: click.Context, name: str, version: str | None, depth: int, as_json: bool) -> None:
    """Show what built a version (upstream, program, git commit, Spark app) and what was built from it."""
    from dal import lineage

    out = lineage.lineage(_read_catalog(ctx), name, version, depth=depth)
    if as_json:
        _emit_json(out)
        return
    click.echo(f"{name} @ version {out['version']}")
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
            click.echo(f"  {label}: {value}")
    if not out.get("time"):
        click.echo("  no lineage recorded (not written by dal.write)")
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


def _print_tree(nodes: Sequence[dict[str, Any]], indent: str) -> None:
    for d in nodes:
        if d.get("truncated"):
            click.echo(f"{indent}... (only the first {d.get('shown')} are listed)")
            continue
        click.echo(printable(f"{indent}{d['dataset']} @ {d['version']}  [{d.get('how') or 'inferred'}]"))
        _print_tree(d.get("downstream") or [], indent + "  ")


@cli.command("head")
@click.argument("name", shell_complete=_complete_names)
@version_option
@click.option("-n", "rows", default=10, show_default=True, type=click.IntRange(0, 10_000), help="Rows to print.")
@click.option("--columns", default=None, help="Comma-separated columns (default: all).")
@click.option("--where", default=None, help="A filter, e.g. \"station = 'KTLX' AND date >= '2026-03-01'\".")
@json_option
@click.pass_context
def head_cmd(
    ctx: click.Context, name: str, version: str | None, rows: int, columns: str | None, where: str | None, as_json: bool
) -> None:
    """Print the first rows of a version (tensor fields as dtype[shape])."""
    from dal.ops import lifecycle

    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    v, records = lifecycle.head(name, version, n=rows, columns=cols, where=where, catalog=_read_catalog(ctx))
    if as_json:
        _emit_json({"dataset": name, "version": v.number, "rows": records})
        return
    if not records:
        click.echo(f"{name} @ version {v.number}: no rows" + (" match" if where else ""))
        return
    names = list(records[0])
    _table(f"{name} @ version {v.number}", names, [[r[c] for c in names] for r in records])


@cli.command("stats")
@click.argument("name", shell_complete=_complete_names)
@version_option
@json_option
@click.pass_context
def stats_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool) -> None:
    """Per-column statistics of a version from file footers (rows, nulls, min, max; distinct for partitions)."""
    from dal.ops import lifecycle

    st = lifecycle.stats(name, version, catalog=_read_catalog(ctx))
    if as_json:
        _emit_json(st.to_dict())
        return
    approx = "" if st.exact else " (deletion vectors: null counts are upper bounds)"
    _table(
        f"{name} @ version {st.version}: {st.rows:,} rows, {st.files} files, {_size(st.size_bytes)}{approx}",
        ["column", "type", "nulls", "min", "max", "distinct"],
        [
            (
                c.name,
                c.type,
                "?" if c.nulls is None else f"{c.nulls:,}",
                _short(c.min),
                _short(c.max),
                "" if c.distinct is None else c.distinct,
            )
            for c in st.columns
        ],
    )


def _short(v: object) -> str:
    if v is None:
        return "-"
    text = str(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _duration(_ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from dal.ops import lifecycle

    try:
        return lifecycle.parse_duration(value)
    except DalError as e:
        raise click.BadParameter(str(e), param=param) from None


@cli.command("gc")
@click.argument("name", shell_complete=_complete_names)
@click.option("--keep-last", type=click.IntRange(min=1), default=None, help="Keep the N newest versions.")
@click.option("--older-than", callback=_duration, default=None, help="Expire only versions older than this (30d, 12h).")
@click.option("--dry-run", is_flag=True, help="Show what would be expired and deleted; change nothing.")
@click.option("--force", is_flag=True, help="Expire tagged versions too.")
@click.option(
    "--safe-age",
    callback=_duration,
    default="1h",
    show_default=True,
    help="Files no version references and no running write claims are deleted only when older than this (a second "
    "line of defence: running writes register intents, whose files gc never deletes).",
)
@json_option
@click.pass_context
def gc_cmd(
    ctx: click.Context,
    name: str,
    keep_last: int | None,
    older_than: Any,
    dry_run: bool,
    force: bool,
    safe_age: Any,
    as_json: bool,
) -> None:
    """Expire old versions and delete the files no kept version needs (tagged versions are kept)."""
    from dal.ops import lifecycle

    r = lifecycle.gc(name, keep_last=keep_last, older_than=older_than, dry_run=dry_run, force=force,
                     safe_age=safe_age, catalog=_catalog(ctx))  # fmt: skip
    if as_json:
        _emit_json(r.to_dict())
        return
    verb = "would expire" if dry_run else "expired"
    expired = ", ".join(str(n) for n in r.expired) or "none"
    tagged = f" (kept tagged: {', '.join(str(n) for n in r.skipped_tagged)})" if r.skipped_tagged else ""
    click.echo(f"{name}: {verb} version(s) {expired}{tagged}")
    if r.finished:
        finished = ", ".join(str(n) for n in r.finished)
        click.echo(
            f"{name}: {'would finish' if dry_run else 'finished'} version(s) {finished} (expired by an earlier gc)"
        )
    click.echo(f"{name}: {'would delete' if dry_run else 'deleted'} {len(r.deleted)} file(s), {_size(r.bytes)}")
    for note in r.notes:
        click.echo(f"{name}: {note}")
    for rel in r.not_followed:
        click.echo(
            f"{name}: {printable(rel)}/ is a symbolic link to a directory: not followed, nothing behind it deleted"
        )
    if dry_run:
        for rel in r.deleted:
            click.echo(f"  {printable(rel)}")


@cli.group("hive", cls=_Group)
def hive_group() -> None:
    """Publish datasets to a Hive Metastore, or adopt Hive tables."""


@hive_group.command("sync")
@click.argument("names", nargs=-1, shell_complete=_complete_names)
@click.option("--uri", required=True, envvar="DAL_HIVE_URI", help="thrift://host:9083")
@click.option("--version", "-v", "version", default=None, help="Version to publish (default: latest).")
@json_option
@click.pass_context
def hive_sync_cmd(ctx: click.Context, names: tuple[str, ...], uri: str, version: str | None, as_json: bool) -> None:
    """Create or update an external Hive table per dataset (all datasets when no NAME is given).

    A dataset that cannot be published does not stop the others: those published are listed, then one error
    line names each that failed (exit 1)."""
    from dal.ops import hive

    failed: hive.HiveSyncError | None = None
    try:
        tables = hive.sync(list(names) or None, uri=uri, version=version, catalog=_catalog(ctx))
    except hive.HiveSyncError as e:
        tables, failed = e.synced, e
    if as_json:
        _emit_json([t.__dict__ for t in tables])
    else:
        for t in tables:
            line = f"{t.dataset} v{t.version} -> {t.database}.{t.table} ({t.partitions} partitions) at {t.location}"
            click.echo(printable(mask_url(line)))
    if failed is not None:
        raise failed


@hive_group.command("import")
@click.argument("qualified")
@click.option("--uri", required=True, envvar="DAL_HIVE_URI", help="thrift://host:9083")
@click.option("--name", default=None, help="Dataset name in the catalog (default: DB.TABLE).")
@json_option
@click.pass_context
def hive_import_cmd(ctx: click.Context, qualified: str, uri: str, name: str | None, as_json: bool) -> None:
    """Register an existing Hive table (Delta, Petastorm or Parquet location) as a dataset."""
    from dal.ops import hive

    versions = hive.import_table(qualified, uri=uri, name=name, catalog=_catalog(ctx))
    if as_json:
        _emit_json([v.to_dict() for v in versions])
        return
    click.echo(printable(f"imported {qualified} as {versions[0].dataset} with {len(versions)} version(s)"))


@cli.group("db", cls=_Group)
def db_group() -> None:
    """Manage the catalog database itself."""


@db_group.command("upgrade")
@json_option
@click.pass_context
def db_upgrade_cmd(ctx: click.Context, as_json: bool) -> None:
    """Create the catalog or upgrade it to this dal's schema revision."""
    from catalog.engine import display_url

    state = ctx.ensure_object(_State)
    before, after = state.catalog(create=False).upgrade()
    where = display_url(state.url)
    if as_json:
        _emit_json({"url": where, "before": before, "revision": after, "upgraded": before != after})
    elif before == after:
        click.echo(f"catalog {where} is up to date (revision {after})")
    else:
        click.echo(f"catalog {where} upgraded from revision {before or 'none'} to {after}")


@db_group.command("status")
@json_option
@click.pass_context
def db_status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Show the catalog URL (password hidden) and its schema revision."""
    from catalog import migrate
    from catalog.engine import display_url

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


@cli.group("cache", cls=_Group)
def cache_group() -> None:
    """The converter's cache (dal.convert) and, with --files, the file cache of remote versions."""


cache_dir_option = click.option(
    "--dir",
    "cache_dir",
    default=None,
    help="Cache folder, or an object-store URL such as s3://bucket/cache reached with the environment's "
    "credentials (default $DAL_CACHE_DIR or <DAL_HOME>/cache). Only a folder dal made for its cache is cleared.",
)


files_option = click.option(
    "--files",
    is_flag=True,
    help="The file cache of remote versions (dal.open(..., cache='local'); --dir default $DAL_FILE_CACHE_DIR "
    "or <DAL_HOME>/filecache) instead of the converter's.",
)


@cache_group.command("ls")
@cache_dir_option
@files_option
@json_option
def cache_ls_cmd(cache_dir: str | None, files: bool, as_json: bool) -> None:
    """List the converted DataFrames in the cache, with their size and the processes using them."""
    from dal.spark import convert_cache

    if files:
        from dal.storage import rangecache

        folder = rangecache.cache_dir(cache_dir)
        used = rangecache.usage(folder) if folder.is_dir() else 0
        if as_json:
            _emit_json({"path": str(folder), "bytes": used})
            return
        click.echo(f"file cache {printable(str(folder))}: {used:,} bytes")
        return
    spec = convert_cache.cache_spec(cache_dir)
    if convert_cache.is_remote(spec):
        loc = convert_cache.remote_root(spec, None, create=False)
        listed = [(e, None, e.users()) for e in convert_cache.remote_entries(loc)]
        if as_json:
            _emit_json([{"key": e.key, "path": e.table, "created": e.created, "rows": e.rows, "bytes": None,
                         "users": users} for e, _, users in listed])  # fmt: skip
            return
        _table(f"cache {mask_url(loc.uri)}", ["key", "created", "rows", "users"],
               [(e.key[:16], e.created, e.rows, len(users)) for e, _, users in listed])  # fmt: skip
        return
    root = convert_cache.cache_root(cache_dir, create=False)
    found = [(e, e.size_bytes(), e.users()) for e in convert_cache.entries(root)]
    if as_json:
        _emit_json([{"key": e.key, "path": str(e.folder), "created": e.created, "rows": e.rows, "bytes": size,
                     "users": users} for e, size, users in found])  # fmt: skip
        return
    _table(f"cache {root}", ["key", "created", "rows", "bytes", "users"],
           [(e.key[:16], e.created, e.rows, size, len(users)) for e, size, users in found])  # fmt: skip


@cache_group.command("clear")
@cache_dir_option
@click.option("--force", is_flag=True, help="Remove entries that running processes still use, too.")
@files_option
@json_option
def cache_clear_cmd(cache_dir: str | None, force: bool, files: bool, as_json: bool) -> None:
    """Remove converted DataFrames no running process uses (all with --force) and abandoned conversions;
    with --files, every range of the file cache (readers then fetch from storage again)."""
    from dal.spark import convert_cache

    if files:
        from dal.storage import rangecache

        folder = rangecache.cache_dir(cache_dir)
        freed = rangecache.clear(folder) if folder.is_dir() else 0
        if as_json:
            _emit_json({"path": str(folder), "freed_bytes": freed})
            return
        click.echo(f"removed {freed:,} bytes from the file cache {printable(str(folder))}")
        return
    spec = convert_cache.cache_spec(cache_dir)
    if convert_cache.is_remote(spec):
        loc = convert_cache.remote_root(spec, None, create=False)
        removed_remote, kept_remote = convert_cache.remote_clear(loc, force=force)
        where, removed_keys, kept_keys = (
            mask_url(loc.uri),
            [e.key for e in removed_remote],
            [e.key for e in kept_remote],
        )
    else:
        root = convert_cache.cache_root(cache_dir, create=False)
        removed, kept = convert_cache.clear(root, force=force)
        where, removed_keys, kept_keys = str(root), [e.key for e in removed], [e.key for e in kept]
    if as_json:
        _emit_json({"removed": removed_keys, "kept": kept_keys})
        return
    click.echo(f"removed {len(removed_keys)} cached conversion(s) from {printable(where)}" +
               (f"; kept {len(kept_keys)} in use (--force removes them)" if kept_keys else ""))  # fmt: skip


@cli.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--token", envvar="DAL_UI_TOKEN", default=None, help="Require this bearer token ($DAL_UI_TOKEN).")
@click.pass_context
def ui_cmd(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Serve a read-only web page and JSON API over the catalog (needs dal-catalog[ui])."""
    from dal.ui import serve

    serve(_read_catalog(ctx), host=host, port=port, token=token)


def _quiet(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        progress.set_enabled(False)
    return value


def _add_quiet(group: click.Group) -> None:
    """``--quiet`` / ``-q`` on every command too (``dal gc NAME -q`` as well as ``dal -q gc NAME``)."""
    for cmd in group.commands.values():
        if isinstance(cmd, click.Group):
            _add_quiet(cmd)
        elif not any("--quiet" in p.opts for p in cmd.params):
            option = click.Option(["--quiet", "-q"], is_flag=True, expose_value=False, callback=_quiet, help=_QUIET)
            cmd.params.append(option)


_add_quiet(cli)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point."""
    # delta-rs logs the cloud SDK's credential-chain warnings (many lines each) to stderr via env_logger;
    # the CLI reports the failure itself in one line, so only errors are logged unless RUST_LOG says otherwise
    os.environ.setdefault("RUST_LOG", "error")
    cli.main(args=list(argv) if argv is not None else None, prog_name="dal")


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
