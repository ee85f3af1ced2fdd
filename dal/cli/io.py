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
@click.option(
    "--read-only", is_flag=True, help="Do not claim the location: read every version, never write or delete it."
)
@json_option
@click.pass_context
def register_cmd(
    ctx: click.Context,
    name: str,
    uri: str,
    fmt: str,
    description: str,
    time_column: str | None,
    read_only: bool,
    as_json: bool,
) -> None:
    """Adopt an existing table: every one of its versions becomes a catalog version.

    The table's location is claimed for this catalog (one catalog writes and deletes there); one claimed by
    another catalog is refused, naming it: register it --read-only to read it from here."""
    from dal.api import register

    versions = register(name, uri, format=fmt, description=description, time_column=time_column,
                        catalog=catalog_of(ctx), read_only=read_only)  # fmt: skip
    if as_json:
        emit_json([v.to_dict() for v in versions])
    else:
        click.echo(f"registered {name}{' read-only' if read_only else ''} with {len(versions)} version(s)")


@click.command("claim")
@click.argument("name", shell_complete=complete_names)
@click.option("--take-over", is_flag=True, help="Move the location's claim to this catalog (logged).")
@click.option("--reason", default="", help="Why the claim moves (kept in the claim's history).")
@json_option
@click.pass_context
def claim_cmd(ctx: click.Context, name: str, take_over: bool, reason: str, as_json: bool) -> None:
    """Which catalog owns the dataset's location (only it writes, optimizes, gc's and purges there)."""
    from dal.errors import printable
    from dal.ops.claim import claim
    from dal.storage.uris import mask_text

    found = claim(name, take_over=take_over, reason=reason, catalog=catalog_of(ctx))
    if as_json:
        emit_json(found.to_dict())
        return
    who = "nobody yet" if found.catalog_url is None else found.catalog_url
    mine = " (this catalog)" if found.ours else " (another catalog)" if found.catalog_url else ""
    line = f"{name}: {found.location} is claimed by {who}{mine}"
    if found.read_only:
        line += "; registered read-only here"
    if found.purging:
        line += "; a purge of it was stopped half-way"
    click.echo(printable(mask_text(line)))


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
COMMANDS: tuple[click.Command, ...] = (register_cmd, claim_cmd, sync_cmd)
