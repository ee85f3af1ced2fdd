"""The ``dal`` command line: the ``dal`` group (catalog choice, logging, progress) and its commands, by group:

- ``datasets``: ls, show, versions, schema, diff, partitions, files, profiles, tag, untag, rename, set
- ``content``: head, stats, lineage
- ``io``: register, sync
- ``maintenance``: drop, gc, cache ls/clear, db upgrade/status
- ``hive``: hive sync/import; ``ui``: the web UI
- ``serve``: dal serve and its administration (principal, token, grant, revoke, grants, audit)

``base`` holds what they share (exit codes, the error-to-one-line group, options), ``output`` how they print
(tables, JSON, the one size formatter), ``complete`` shell completion.

User mistakes (unknown dataset or version, bad name, unreachable catalog) print one line and exit 1; with
``--json`` they are a JSON object ``{"error", "type", "exit_code"}`` on stderr. Shell completion:
``eval "$(_DAL_COMPLETE=bash_source dal)"`` (zsh_source, fish_source for other shells).

Long operations (register, sync, gc, hive sync) draw a progress line on stderr when it is a terminal
(``dal.progress``); ``--quiet`` / ``-q`` (before or after the command) or ``DAL_PROGRESS=0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from dal import progress
from dal._version import __version__
from dal.cli import content, datasets, hive, io, labels, maintenance, serve, ui
from dal.cli.base import (
    EXIT_BUG,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    QUIET_HELP,
    QUIET_LOGGERS,
    Group,
    State,
)

__all__ = ["EXIT_BUG", "EXIT_INTERRUPTED", "EXIT_USER_ERROR", "cli", "main"]

# Start-up: ``dal --help``, ``dal ls``, ``dal show``, ``dal versions`` and shell completion import neither
# SQLAlchemy, alembic, pyarrow, pandas nor rich's tables until a command needs them (tests/cli/test_startup.py);
# the browsing commands read an up-to-date catalog through catalog.lite (the DB-API driver only). The command
# modules import only click and light helpers at the top; each command imports what it needs when it runs.

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


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option("--quiet", "-q", is_flag=True, help=QUIET_HELP)
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
    ctx.obj = State(_catalog_choice(ctx, catalog_url, profile))
    ctx.call_on_close(ctx.obj.close)


def _catalog_choice(ctx: click.Context, url: str | None, profile: str | None) -> str | None:
    """The catalog URL: --catalog, else --profile, else $DAL_CATALOG_URL, else $DAL_PROFILE, else the config
    file's default profile, else the embedded catalog (``dal.catalog.home.default_url``)."""
    from click.core import ParameterSource

    def typed(name: str) -> bool:
        return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE

    if url and typed("catalog_url"):
        return url
    from dal.catalog.home import choose_profile, profile_url

    choose_profile(profile if profile and typed("profile") else None)  # its token file, not another profile's
    ctx.call_on_close(lambda: choose_profile(None))
    if profile and typed("profile"):
        return profile_url(profile)
    return url or None  # $DAL_CATALOG_URL; else default_url() reads $DAL_PROFILE and the config file


COMMANDS: tuple[click.Command, ...] = (
    *datasets.COMMANDS,
    *labels.COMMANDS,
    *content.COMMANDS,
    *io.COMMANDS,
    *maintenance.COMMANDS,
    hive.hive_group,
    ui.ui_cmd,
    *serve.COMMANDS,
)
for _command in COMMANDS:
    cli.add_command(_command)


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
            option = click.Option(["--quiet", "-q"], is_flag=True, expose_value=False, callback=_quiet, help=QUIET_HELP)
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
