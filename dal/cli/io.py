"""Bring tables into the catalog: register (adopt an existing table with all its versions) and sync (record
versions other tools committed)."""

from __future__ import annotations

import click

from dal.cli.base import catalog_of, json_option
from dal.cli.complete import complete_names
from dal.cli.output import emit_json
from dal.formats.names import DEFAULT_FORMAT


@click.command("register")
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

    versions = register(
        name, uri, format=fmt, description=description, time_column=time_column, catalog=catalog_of(ctx)
    )
    if as_json:
        emit_json([v.to_dict() for v in versions])
    else:
        click.echo(f"registered {name} with {len(versions)} version(s)")


@click.command("sync")
@click.argument("name", shell_complete=complete_names)
@json_option
@click.pass_context
def sync_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """Record versions that other tools committed to the dataset's table since the catalog last looked."""
    from dal.api import sync

    versions = sync(name, catalog=catalog_of(ctx))
    if as_json:
        emit_json([v.to_dict() for v in versions])
    elif versions:
        click.echo(f"{name}: recorded {len(versions)} new version(s) ({versions[0].number}..{versions[-1].number})")
    else:
        click.echo(f"{name}: up to date")


#: The commands this module adds to ``dal`` (dal.cli.app registers them).
COMMANDS: tuple[click.Command, ...] = (register_cmd, sync_cmd)
