"""Delete and clean up: drop (--purge), gc, optimize (compaction), delete (rows) and verify-deleted, the converter's and file caches (cache ls/clear), and the catalog
database itself (db upgrade/status). Every deletion goes through dal.ops.lifecycle, dal.spark.convert_cache or
dal.storage.rangecache, which delete only what they can prove is theirs (dal/storage/ownership.py)."""

from __future__ import annotations

import sys
from typing import Any

import click

from dal.catalog.urls import mask_url
from dal.cli.base import Group, State, existing_catalog_of, json_option, output_option
from dal.cli.complete import complete_names
from dal.cli.output import emit_json, output_format, print_table, size_text
from dal.errors import DalError, printable


@click.command("drop")
@click.argument("name", shell_complete=complete_names)
@click.option("--purge", is_flag=True, help="Also delete the data dal wrote at the dataset's location.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help="With --purge: delete dal's files even if other files are there (kept).")
@json_option
@click.pass_context
def drop_cmd(ctx: click.Context, name: str, purge: bool, yes: bool, force: bool, as_json: bool) -> None:
    """Remove a dataset (versions and tags) from the catalog; --purge also deletes its data."""
    from dal.ops import lifecycle

    cat = existing_catalog_of(ctx)
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
        emit_json(out)
    elif purge:
        left = f"; left {len(result.left)} file(s) dal did not write" if result.left else ""
        click.echo(
            f"dropped {name}: deleted {len(result.deleted)} file(s) at {printable(mask_url(info.location))}{left}"
        )
    else:
        click.echo(f"dropped {name} from the catalog; its data is still at {printable(mask_url(info.location))}")


def _duration(_ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from dal.ops import lifecycle

    try:
        return lifecycle.parse_duration(value)
    except DalError as e:
        raise click.BadParameter(str(e), param=param) from None


@click.command("gc")
@click.argument("name", shell_complete=complete_names)
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
                     safe_age=safe_age, catalog=existing_catalog_of(ctx))  # fmt: skip
    if as_json:
        emit_json(r.to_dict())
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
    click.echo(f"{name}: {'would delete' if dry_run else 'deleted'} {len(r.deleted)} file(s), {size_text(r.bytes)}")
    for note in r.notes:
        click.echo(f"{name}: {note}")
    for rel in r.not_followed:
        click.echo(
            f"{name}: {printable(rel)}/ is a symbolic link to a directory: not followed, nothing behind it deleted"
        )
    if dry_run:
        for rel in r.deleted:
            click.echo(f"  {printable(rel)}")


def _size(_ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    from dal import validate
    from dal.storage.rangecache import parse_size

    try:
        size = parse_size(value)
    except DalError:
        raise click.BadParameter(f"{value!r} is not a size such as 64MB, 128MiB or 1GiB", param=param) from None
    try:
        return validate.file_size(size, "--target-file-size")  # the bound dal.write and optimize apply
    except DalError as e:
        raise click.BadParameter(str(e), param=param) from None


@click.command("optimize")
@click.argument("name", shell_complete=complete_names)
@click.option(
    "--target-file-size",
    callback=_size,
    default=None,
    help="Bytes per file to aim for (128MiB by default; 64MB, 1GiB, 5000000).",
)
@json_option
@click.pass_context
def optimize_cmd(ctx: click.Context, name: str, target_file_size: int | None, as_json: bool) -> None:
    """Compact the latest version's small files into a new version with the same rows (gc reclaims the old)."""
    from dal.formats.base import TARGET_FILE_SIZE
    from dal.ops import lifecycle

    target = TARGET_FILE_SIZE if target_file_size is None else target_file_size
    r = lifecycle.optimize(name, target_file_size=target, catalog=existing_catalog_of(ctx))
    if as_json:
        emit_json(r.to_dict())
    elif r.version is None:
        click.echo(f"{name}: already compact ({r.files_before} file(s), {size_text(r.bytes_before)}); nothing written")
    else:
        click.echo(
            f"{name}: version {r.version}: {r.files_before} file(s) ({size_text(r.bytes_before)}) compacted into "
            f"{r.files_after} ({size_text(r.bytes_after)}); `dal gc` reclaims the old files once they expire"
        )


@click.command("delete")
@click.argument("name", shell_complete=complete_names)
@click.option("--where", required=True, help="The rows to delete (SQL, as --where of dal head).")
@json_option
@click.pass_context
def delete_cmd(ctx: click.Context, name: str, where: str, as_json: bool) -> None:
    """Delete rows: a new version without the rows --where matches (older versions keep them until they expire;
    `dal gc --keep-last N --force` then deletes their files, `dal verify-deleted` checks none is left)."""
    from dal.api import delete

    cat = existing_catalog_of(ctx)
    before = cat.version(name).number
    version = delete(name, where, catalog=cat)
    if as_json:
        emit_json({"dataset": name, "version": version.number, "deleted": version.number != before})
    elif version.number == before:
        click.echo(f"{name}: no row matches; nothing deleted (version {before} is the latest)")
    else:
        click.echo(
            f"{name}: version {version.number} without the rows matching {printable(where)}; versions up to "
            f"{before} still hold them until they expire"
        )


@click.command("verify-deleted")
@click.argument("name", shell_complete=complete_names)
@click.option("--where", required=True, help="The rows that must be gone (SQL).")
@json_option
@click.pass_context
def verify_deleted_cmd(ctx: click.Context, name: str, where: str, as_json: bool) -> None:
    """Check that no Parquet data file under the dataset's location holds a row --where matches, whatever version
    (or none) references it: exit 1 and list the files that do."""
    from dal.ops import lifecycle

    r = lifecycle.verify_deleted(name, where=where, catalog=existing_catalog_of(ctx))
    if as_json:
        emit_json(r.to_dict())
    else:
        for path, rows in r.files_with_rows:
            click.echo(f"{printable(path)}: {rows} matching row(s)")
        for path in r.files_unchecked:
            click.echo(f"{printable(path)}: cannot tell (a partition column of the predicate is not in the file)")
    if r.files_with_rows:
        raise DalError(
            f"{name}: {len(r.files_with_rows)} of {r.files_scanned} data file(s) still hold rows matching "
            f"{where}: expire the versions before the delete and gc their files"
        )
    if r.files_unchecked:
        raise DalError(f"{name}: {len(r.files_unchecked)} data file(s) could not be checked against {where}")
    if not as_json:
        click.echo(f"{name}: none of the {r.files_scanned} data file(s) holds a row matching {printable(where)}")


@click.group("db", cls=Group)
def db_group() -> None:
    """Manage the catalog database itself."""


@db_group.command("upgrade")
@json_option
@click.pass_context
def db_upgrade_cmd(ctx: click.Context, as_json: bool) -> None:
    """Create the catalog or upgrade it to this dal's schema revision."""
    from dal.catalog.engine import display_url

    state = ctx.ensure_object(State)
    before, after = state.catalog(create=False).upgrade()
    where = display_url(state.url)
    if as_json:
        emit_json({"url": where, "before": before, "revision": after, "upgraded": before != after})
    elif before == after:
        click.echo(f"catalog {where} is up to date (revision {after})")
    else:
        click.echo(f"catalog {where} upgraded from revision {before or 'none'} to {after}")


@db_group.command("status")
@json_option
@click.pass_context
def db_status_cmd(ctx: click.Context, as_json: bool) -> None:
    """Show the catalog URL (password hidden) and its schema revision."""
    from dal.catalog import migrate
    from dal.catalog.engine import display_url

    state = ctx.ensure_object(State)
    cat = state.catalog(create=False)
    current = cat.revision()
    head = migrate.head_revision()
    info = {"url": display_url(state.url), "revision": current, "head": head, "up_to_date": current == head}
    if as_json:
        emit_json(info)
    else:
        if current is None:
            status = f"not created yet (created on first use, or by `{migrate.UPGRADE_COMMAND}`)"
        else:
            status = "up to date" if current == head else f"needs `{migrate.UPGRADE_COMMAND}`"
        click.echo(f"catalog {info['url']}: revision {current or 'none'} (head {head}), {status}")


@click.group("cache", cls=Group)
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
@output_option
def cache_ls_cmd(cache_dir: str | None, files: bool, as_json: bool, output: str | None) -> None:
    """List the converted DataFrames in the cache, with their size and the processes using them."""
    from dal.spark import convert_cache

    out = output_format(as_json, output)
    as_json = out == "json"

    if files:
        from dal.storage import rangecache

        folder = rangecache.cache_dir(cache_dir)
        used = rangecache.usage(folder) if folder.is_dir() else 0
        if as_json:
            emit_json({"path": str(folder), "bytes": used})
            return
        click.echo(f"file cache {printable(str(folder))}: {used:,} bytes")
        return
    spec = convert_cache.cache_spec(cache_dir)
    if convert_cache.is_remote(spec):
        loc = convert_cache.remote_root(spec, None, create=False)
        listed = [(e, None, e.users()) for e in convert_cache.remote_entries(loc)]
        if as_json:
            emit_json([{"key": e.key, "path": e.table, "created": e.created, "rows": e.rows, "bytes": None,
                         "users": users} for e, _, users in listed])  # fmt: skip
            return
        print_table(f"cache {mask_url(loc.uri)}", ["key", "created", "rows", "users"],
                    [(e.key[:16], e.created, e.rows, len(users)) for e, _, users in listed], out)  # fmt: skip
        return
    root = convert_cache.cache_root(cache_dir, create=False)
    found = [(e, e.size_bytes(), e.users()) for e in convert_cache.entries(root)]
    if as_json:
        emit_json([{"key": e.key, "path": str(e.folder), "created": e.created, "rows": e.rows, "bytes": size,
                     "users": users} for e, size, users in found])  # fmt: skip
        return
    print_table(f"cache {root}", ["key", "created", "rows", "bytes", "users"],
                [(e.key[:16], e.created, e.rows, size, len(users)) for e, size, users in found], out)  # fmt: skip


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
            emit_json({"path": str(folder), "freed_bytes": freed})
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
        emit_json({"removed": removed_keys, "kept": kept_keys})
        return
    click.echo(f"removed {len(removed_keys)} cached conversion(s) from {printable(where)}" +
               (f"; kept {len(kept_keys)} in use (--force removes them)" if kept_keys else ""))  # fmt: skip


#: The commands this module adds to ``dal`` (dal.cli.app registers them).
COMMANDS: tuple[click.Command, ...] = (drop_cmd, gc_cmd, optimize_cmd, delete_cmd, verify_deleted_cmd, db_group,
                                        cache_group)  # fmt: skip
