"""What every ``dal`` command shares: the exit codes, the error-to-one-line group, the per-invocation catalog
state, and the options several commands take (``--json``, ``--output``, ``--version``, ``--limit``).

Imports nothing heavy: the catalog is opened on first use, through ``dal.catalog.lite`` where it can serve.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import TYPE_CHECKING, Any, cast

import click

from dal.catalog.home import default_url
from dal.cli.complete import complete_versions
from dal.errors import DalError, is_foreign, one_line, translate

if TYPE_CHECKING:
    from dal.catalog import Catalog
    from dal.catalog.lite import CatalogReader, LiteCatalog

EXIT_USER_ERROR = 1
OUTPUTS = ("table", "plain", "tsv", "json")  # the layouts of a table command (dal.cli.output)
EXIT_BUG = 70  # EX_SOFTWARE: dal itself failed
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
ENV_DEBUG = "DAL_DEBUG"
QUIET_LOGGERS = ("thrift", "hive_metastore_client", "py4j")
QUIET_HELP = "No progress line on stderr (progress is drawn only on a terminal; also DAL_PROGRESS=0)."


class Group(click.Group):
    """Turns every error into one line on stderr instead of a traceback.

    dal's own errors, and errors of the libraries and storage it calls (pyarrow, delta-rs, OSError…), are
    ``dal: error: …`` and exit 1. Anything else is a bug in dal: one ``dal: internal error: …`` line asking
    for a report, exit 70, and the traceback only with ``DAL_DEBUG=1``.
    """

    def invoke(self, ctx: click.Context) -> Any:
        if wants_json(ctx):  # before click hands the words to the subcommand (and clears them here)
            ctx.meta["dal.json"] = True
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:  # Ctrl-C: one line and the shell's 128 + SIGINT, not click's "Aborted!" and 1
            if wants_json(ctx):
                _json_error(ctx, "interrupted", "KeyboardInterrupt", EXIT_INTERRUPTED)
            click.echo("dal: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except click.exceptions.ClickException as e:
            if not wants_json(ctx):
                raise
            _json_error(ctx, e.format_message(), "usage" if isinstance(e, click.UsageError) else "error", e.exit_code)
        except DalError as e:
            if wants_json(ctx):
                _json_error(ctx, one_line(e), type(e).__name__, EXIT_USER_ERROR)
            click.echo(f"dal: error: {one_line(e)}", err=True)
            ctx.exit(EXIT_USER_ERROR)
        except Exception as e:
            if is_foreign(e):
                err = translate(e, "dal " + (ctx.invoked_subcommand or ""))
                if wants_json(ctx):
                    _json_error(ctx, one_line(err), type(err).__name__, EXIT_USER_ERROR)
                click.echo(f"dal: error: {one_line(err)}", err=True)
                ctx.exit(EXIT_USER_ERROR)
            if os.environ.get(ENV_DEBUG):
                raise
            message = (
                f"{one_line(f'{type(e).__name__}: {e}')} (a bug in dal: please report it "
                f"with the command that caused it; {ENV_DEBUG}=1 shows the traceback)"
            )
            if wants_json(ctx):
                _json_error(ctx, message, "InternalError", EXIT_BUG)
            click.echo(f"dal: internal error: {message}", err=True)
            ctx.exit(EXIT_BUG)


def wants_json(ctx: click.Context) -> bool:
    """Whether the command line asked for --json (errors then are a JSON object on stderr)."""
    if ctx.meta.get("dal.json"):
        return True
    words = [*getattr(ctx, "_protected_args", ()), *ctx.args]
    words = words[: words.index("--")] if "--" in words else words
    if "--json" in words or "--output=json" in words or "-ojson" in words:
        return True
    return any(w in ("-o", "--output") and nxt == "json" for w, nxt in itertools.pairwise(words))


def _json_error(ctx: click.Context, message: str, kind: str, code: int) -> None:
    """``{"error": …, "type": …, "exit_code": …}`` on stderr, then exit ``code``."""
    click.echo(json.dumps({"error": message, "type": kind, "exit_code": code}), err=True)
    ctx.exit(code)


class State:
    """The catalog of one invocation, opened on first use (browsing reads through catalog.lite)."""

    def __init__(self, url: str | None) -> None:
        self.url = url or default_url()  # the --profile option has resolved a profile's URL already
        self._catalog: Catalog | None = None
        self._lite: LiteCatalog | None = None
        self._lite_tried = False

    def catalog(self, *, create: bool = True, must_exist: bool = False, pooled: bool = False) -> Catalog:
        """The full catalog (SQLAlchemy); ``create=False`` never creates or migrates one; ``must_exist`` for
        read-only commands (a missing SQLite file is an error, not a new catalog: a mistyped --catalog must
        not create folders and an empty catalog); ``pooled`` for a server (``Catalog``'s)."""
        if self._catalog is None:
            from dal.catalog import Catalog, remote

            if remote.is_remote(self.url):  # a dal serve catalog: the server checks grants (dal.catalog.remote)
                # RemoteCatalog has the methods of Catalog the commands use; any other is RemoteNotSupported
                self._catalog = cast("Catalog", remote.client(self.url))
                return self._catalog
            self._catalog = Catalog(self.url, create=create, must_exist=must_exist, pooled=pooled)
        return self._catalog

    def reader(self) -> CatalogReader:
        """The quick read-only reader when it can serve this catalog (catalog.lite), else the full Catalog; a
        PostgreSQL server that refuses connections for now is waited for once, by both together
        (``dal.catalog.retry``)."""
        from dal.catalog import remote, retry

        if remote.is_remote(self.url):  # a dal serve catalog (its client retries on its own)
            return remote.client(self.url)
        with retry.window():
            if not self._lite_tried:
                self._lite_tried = True
                from dal.catalog import lite

                self._lite = lite.connect(self.url)
            return self._lite if self._lite is not None else self.catalog(must_exist=True)

    def close(self) -> None:
        """Close the quick reader, if one was opened."""
        if self._lite is not None:
            self._lite.close()


def catalog_of(ctx: click.Context) -> Catalog:
    """The full catalog of this invocation (``--catalog``/``--profile`` or the default)."""
    return ctx.ensure_object(State).catalog()


def embedded_catalog_missing(ctx: click.Context) -> bool:
    """Whether this invocation reads the embedded default catalog (no --catalog, profile or
    $DAL_CATALOG_URL named another) and that file does not exist yet: a fresh machine, where listing shows
    "no datasets yet" (creating nothing), unlike a named catalog that is missing (a typo: an error)."""
    from dal.catalog.home import data_dir

    file = data_dir() / "catalog.db"
    return ctx.ensure_object(State).url == f"sqlite:///{file}" and not file.exists()


def existing_catalog_of(ctx: click.Context) -> Catalog:
    """The full catalog for a command that needs datasets already recorded (reads; tag, rename, set, drop, gc):
    never created by it (see ``State.catalog``)."""
    return ctx.ensure_object(State).catalog(must_exist=True)


def reader_of(ctx: click.Context) -> CatalogReader:
    """The read-only catalog reader of this invocation (catalog.lite when it can serve)."""
    return ctx.ensure_object(State).reader()


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta["dal.json"] = True
    return value


json_option = click.option(
    "--json", "as_json", is_flag=True, callback=_remember_json, help="Print JSON (errors: a JSON object on stderr)."
)


def _remember_output(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value == "json":
        ctx.meta["dal.json"] = True
    return value


output_option = click.option(
    "--output",
    "-o",
    "output",
    type=click.Choice(OUTPUTS),
    default=None,
    callback=_remember_output,
    help="How to print: table (the default on a terminal), tsv (the default when stdout is not a terminal: a "
    "header line, then one row per line, tab-separated), plain (aligned columns, one row per line), json (--json).",
)
version_option = click.option(
    "--version",
    "-v",
    "version",
    default=None,
    help="Version number, tag, or ISO timestamp (default: latest).",
    shell_complete=lambda ctx, param, incomplete: complete_versions(ctx, param, incomplete),
)


LS_LIMIT = 1000
limit_option = click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=LS_LIMIT,
    show_default=True,
    help="At most this many, the first by name (0: all; a catalog can hold tens of thousands).",
)
