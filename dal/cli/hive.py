"""The Hive Metastore: publish datasets as external tables (hive sync) or adopt Hive tables (hive import)."""

from __future__ import annotations

import click

from dal.catalog.urls import mask_url
from dal.cli.base import Group, catalog_of, json_option
from dal.cli.complete import complete_names
from dal.cli.output import emit_json
from dal.errors import printable


@click.group("hive", cls=Group)
def hive_group() -> None:
    """Publish datasets to a Hive Metastore, or adopt Hive tables."""


@hive_group.command("sync")
@click.argument("names", nargs=-1, shell_complete=complete_names)
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
        tables = hive.sync(list(names) or None, uri=uri, version=version, catalog=catalog_of(ctx))
    except hive.HiveSyncError as e:
        tables, failed = e.synced, e
    if as_json:
        emit_json([t.__dict__ for t in tables])
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
@click.option("--read-only", is_flag=True, help="Do not claim the table's location: read it, never write or delete.")
@json_option
@click.pass_context
def hive_import_cmd(
    ctx: click.Context, qualified: str, uri: str, name: str | None, read_only: bool, as_json: bool
) -> None:
    """Register an existing Hive table (Delta, Petastorm or Parquet location) as a dataset (claiming its
    location for this catalog, as dal register does, unless --read-only)."""
    from dal.ops import hive

    versions = hive.import_table(qualified, uri=uri, name=name, catalog=catalog_of(ctx), read_only=read_only)
    if as_json:
        emit_json([v.to_dict() for v in versions])
        return
    click.echo(printable(f"imported {qualified} as {versions[0].dataset} with {len(versions)} version(s)"))
