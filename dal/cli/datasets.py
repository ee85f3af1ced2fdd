"""Browse and edit the catalog's datasets: ls, show, versions, schema, diff, partitions, files, profiles, tag,
untag, rename, set."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from dal.catalog.urls import mask_url
from dal.cli.base import (
    embedded_catalog_missing,
    existing_catalog_of,
    json_option,
    limit_option,
    output_option,
    reader_of,
    version_option,
)
from dal.cli.complete import complete_names, complete_tags, complete_versions
from dal.cli.labels import labels_text
from dal.cli.output import emit_json, output_format, print_empty, print_table, size_text, time_text
from dal.errors import printable
from dal.ops import views
from dal.ops.views import dataset_dict

if TYPE_CHECKING:
    from dal.catalog import VersionInfo


@click.command("ls")
@click.argument("pattern", required=False, shell_complete=complete_names)
@click.option("--label", default=None, metavar="LABEL", help="Only datasets with this label (KEY or KEY=VALUE, exactly) "
              "on themselves or on a column.")  # fmt: skip
@limit_option
@json_option
@output_option
@click.pass_context
def ls_cmd(
    ctx: click.Context, pattern: str | None, label: str | None, limit: int, as_json: bool, output: str | None
) -> None:
    """List datasets; PATTERN is a glob on names (weather.*) or a substring of name or description; --label: only
    those with that label."""
    out = output_format(as_json, output)
    as_json = out == "json"
    if label is not None:
        from dal.catalog.types import parse_label

        parse_label(label)  # refused as such, even where there is nothing to list
    if embedded_catalog_missing(ctx):  # a fresh machine: nothing to list, and nothing is created
        if as_json:
            emit_json([])
        else:
            print_empty(LS_COLUMNS, "no datasets yet (the first write creates the catalog)", out)
        return
    reader = reader_of(ctx)
    if label is not None:  # the labelled names first (one query), then the listing among them
        labelled = existing_catalog_of(ctx).labelled(label)
        datasets = [d for d in reader.list_datasets(pattern) if d.name in labelled]
        datasets = datasets[: limit + 1] if limit else datasets
    else:
        datasets = reader.list_datasets(pattern, limit=limit + 1) if limit else reader.list_datasets(pattern)
    more = bool(limit) and len(datasets) > limit
    datasets = datasets[:limit] if limit else datasets
    if more:
        click.echo(f"dal: listed the first {limit:,} datasets by name; more match (--limit N, or --limit 0: all)",
                   err=True)  # fmt: skip
    if as_json:
        # the row count and size of each one's latest version, as /api/datasets has them (one more query)
        sizes = reader.latest_sizes(pattern, limit=None if label else limit or None) if datasets else {}
        items = []
        for d in datasets:
            item = dataset_dict(d)
            item["latest_row_count"], item["latest_size_bytes"] = sizes.get(d.name, (None, None))
            items.append(item)
        emit_json(items)
        return
    if not datasets:
        labelled_text = f" labelled {label!r}" if label else ""
        matching = f" match {pattern!r}" if pattern else "" if label else " yet"
        print_empty(LS_COLUMNS, "no datasets" + labelled_text + matching, out)
        return
    print_table(
        None,
        LS_COLUMNS,
        [
            (
                d.name,
                d.format,
                "-" if d.latest_version is None else d.latest_version,
                time_text(d.updated_at),
                d.description,
            )
            for d in datasets
        ],
        out,
    )


LS_COLUMNS = ("name", "format", "latest", "updated", "description")


@click.command("show")
@click.argument("name", shell_complete=complete_names)
@click.option("--property", "prop", default=None, metavar="KEY", help="Print only this property's value.")
@json_option
@output_option
@click.pass_context
def show_cmd(ctx: click.Context, name: str, prop: str | None, as_json: bool, output: str | None) -> None:
    """Show a dataset: location, owner, time column, its newest version, its tags, the labels of the dataset
    and its columns, and the newest version's column descriptions (--property KEY: one property)."""
    out = output_format(as_json, output)
    as_json = out == "json"
    cat = reader_of(ctx)
    if prop is not None:
        value = _property(cat.get_dataset(name), prop)
        if as_json:
            emit_json({"dataset": name, "property": prop, "value": value})
        else:
            click.echo(printable(value if isinstance(value, str) else json.dumps(value)))
        return
    if as_json:
        emit_json(views.show(cat, name))
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
        ("created", time_text(ds.created_at)),
        ("updated", time_text(ds.updated_at)),
    ]
    if latest is None:
        rows.append(("versions", "none yet"))
    else:
        rows += [
            ("latest version", latest.number),
            ("rows", f"{latest.row_count:,}"),
            ("files", latest.file_count),
            ("size", size_text(latest.size_bytes)),
            ("columns", len(latest.schema)),
            ("partitioned by", ", ".join(latest.partition_columns) or "-"),
            # every version's tags, not only the latest's: tag=version, newest version first
            ("tags", tags_text(cat.tags(name)) or "-"),
        ]
    found = cat.labels(name)
    rows.append(("labels", labels_text(found) or "-"))
    # the labels of each column, in the newest version's order (then columns it no longer has)
    order = {c: i for i, c in enumerate(latest.schema.names if latest else ())}
    for column in sorted({b.column for b in found if b.column}, key=lambda c: (order.get(c, len(order)), c)):
        rows.append((f"labels of {column}", labels_text(found, column)))
    # the newest version's column descriptions (Delta/Spark/Arrow column comments; dal schema has them all)
    rows += [(f"description of {f.name}", f.description) for f in (latest.schema if latest else ()) if f.description]
    print_table(None, ["field", "value"], rows, out)


def tags_text(tags: Mapping[str, int]) -> str:
    """A dataset's tags as ``prod=3, rc=3, first=0``: newest version first, by name within a version."""
    return ", ".join(f"{t}={n}" for t, n in sorted(tags.items(), key=lambda item: (-item[1], item[0])))


def _property(info: Any, key: str) -> Any:
    """One property of a dataset (``dal set --property`` sets them); a missing key names the ones there are."""
    from dal.catalog.errors import NotFound, suggest

    if key not in info.properties:
        known = ", ".join(sorted(info.properties)) or "none"
        raise NotFound(f"{info.name} has no property {key!r}{suggest(key, info.properties)} (properties: {known})")
    return info.properties[key]


def _version_rows(
    versions: Sequence[VersionInfo], checked: Mapping[int, str | None] | None = None
) -> list[tuple[object, ...]]:
    return [
        (
            v.number,
            time_text(v.created_at),
            # committed by another catalog's writer (dal.storage.claims.FOREIGN): said wherever it is listed
            f"{v.operation} (foreign)" if v.properties.get("foreign") is True else v.operation,
            f"{v.row_count:,}",
            size_text(v.size_bytes),
            ", ".join(v.tags),
            _status(v, checked),
        )
        for v in versions
    ]


def _status(v: VersionInfo, checked: Mapping[int, str | None] | None) -> str:
    """What is known of whether ``v`` can be read: the catalog's mark, else a check's finding (``checked``: from
    ``dal.ops.checks.unreadable``), else nothing (the catalog alone cannot tell)."""
    if v.unavailable:
        return "expired"
    if checked is None or v.number not in checked:
        return ""
    return "unreadable" if checked[v.number] else "readable"


@click.command("versions")
@click.argument("name", shell_complete=complete_names)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the newest N versions.")
@click.option(
    "--check",
    is_flag=True,
    help="Look in storage whether every file each listed version pins is still there (readable / unreadable); "
    "costs a file list per version and a look per file.",
)
@json_option
@output_option
@click.pass_context
def versions_cmd(
    ctx: click.Context, name: str, limit: int | None, check: bool, as_json: bool, output: str | None
) -> None:
    """List the versions of a dataset, oldest first; the status is the catalog's (expired) unless --check."""
    out = output_format(as_json, output)
    if out == "json":
        emit_json(views.versions(reader_of(ctx), name, limit, check=check))
        return
    reader = reader_of(ctx)
    versions = reader.versions(name) if limit is None else reader.versions(name, limit=limit)
    # files and storage versions: --json (80 columns hold these)
    columns = ["version", "created (UTC)", "operation", "rows", "size", "tags", "status"]
    if out != "table":  # one line per version: why it cannot be read is a column, not a line after the table
        columns.append("unreadable")
    if not versions:
        print_empty(columns, f"{name} has no versions yet", out)
        return
    checked = None
    if check:
        from dal.ops import checks  # storage libraries: only for a check (a listing starts at once)

        checked = checks.unreadable(reader.get_dataset(name), versions)
    rows = _version_rows(versions, checked)
    whys = [v.unavailable or (checked or {}).get(v.number) for v in versions]
    if out != "table":
        print_table(name, columns, [(*row, why) for row, why in zip(rows, whys, strict=True)], out)
        return
    print_table(
        name,
        columns,
        rows,
        out,
        after=[
            f"version {v.number}: {why}" for v, why in zip(versions, whys, strict=True) if why and not v.unavailable
        ],
    )


@click.command("schema")
@click.argument("name", shell_complete=complete_names)
@version_option
@json_option
@output_option
@click.pass_context
def schema_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool, output: str | None) -> None:
    """Show the schema of one version: tensor fields with dtype, shape and codec, each column's labels and its
    description (a Delta/Spark/Arrow column comment)."""
    out = output_format(as_json, output)
    if out == "json":
        emit_json(views.schema(existing_catalog_of(ctx), name, version))
        return
    cat = existing_catalog_of(ctx)
    v = cat.version(name, version)
    labels = cat.labels(name)
    print_table(
        f"{name} @ version {v.number}",
        ["#", "column", "type", "nullable", "tensor", "labels", "description"],
        [
            (
                i,
                f.name + (" (partition)" if f.name in v.partition_columns else ""),
                f.type,
                "yes" if f.nullable else "no",
                f.describe() if f.is_tensor else "",
                labels_text(labels, f.name),
                f.description or "",
            )
            for i, f in enumerate(v.schema)
        ],
        out,
    )


@click.command("diff")
@click.argument("name", shell_complete=complete_names)
@click.argument("old", shell_complete=complete_versions)
@click.argument("new", shell_complete=complete_versions)
@json_option
@output_option
@click.pass_context
def diff_cmd(ctx: click.Context, name: str, old: str, new: str, as_json: bool, output: str | None) -> None:
    """Compare the schemas of two versions (numbers, tags or timestamps)."""
    out = output_format(as_json, output)
    cat = existing_catalog_of(ctx)
    if out == "json":
        emit_json(views.diff(cat, name, old, new))
        return
    d = cat.diff(name, old, new)
    a, b = cat.version(name, old), cat.version(name, new)
    rows: list[tuple[object, ...]] = [("+", f.name, "", f.describe()) for f in d.added]
    rows += [("-", f.name, f.describe(), "") for f in d.removed]
    rows += [("~", c.name, _field_text(c.old), _field_text(c.new)) for c in d.changed]
    columns = ["change", "column", "old", "new"]
    count = f"rows: {a.row_count:,} -> {b.row_count:,} ({b.row_count - a.row_count:+,})"
    if rows:
        print_table(f"{name}: schema {d.old_version} -> {d.new_version}", columns, rows, out, after=[count])
    else:
        print_empty(columns, f"{name}: schema unchanged from version {d.old_version} to {d.new_version}", out)
        click.echo(count, err=out == "tsv")


def _field_text(f: Any) -> str:
    return f"{f.describe()}{'' if f.nullable else ' not null'}"


@click.command("partitions")
@click.argument("name", shell_complete=complete_names)
@version_option
@json_option
@output_option
@click.pass_context
def partitions_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool, output: str | None) -> None:
    """List the partitions present in one version, with row counts."""
    out = output_format(as_json, output)
    cat = existing_catalog_of(ctx)
    if out == "json":
        emit_json(views.partitions(cat, name, version))
        return
    v = cat.version(name, version)
    parts = cat.partitions(name, v.number)
    columns = ["partition", "rows", "files", "size"]
    if not v.partition_columns:
        print_empty(columns, f"{name} @ version {v.number} is not partitioned ({v.row_count:,} rows)", out)
        return
    print_table(
        f"{name} @ version {v.number} by {', '.join(v.partition_columns)}",
        columns,
        [(p.key, f"{p.row_count:,}", p.file_count, size_text(p.size_bytes)) for p in parts],
        out,
    )


@click.command("files")
@click.argument("name", shell_complete=complete_names)
@click.argument("version", required=False, shell_complete=complete_versions)
@json_option
@output_option
@click.pass_context
def files_cmd(ctx: click.Context, name: str, version: str | None, as_json: bool, output: str | None) -> None:
    """List the data files of a version (default: the latest): path, partition, rows, size."""
    from dal import api

    out = output_format(as_json, output)
    as_json = out == "json"

    ds = api.open(name, version, catalog=existing_catalog_of(ctx))
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
        emit_json({"dataset": name, "version": ds.number, "location": mask_url(ds.location), "files": entries})
        return
    columns = ["file", "rows", "size"]
    if not entries:
        print_empty(columns, f"{name} @ version {ds.number}: no data files", out)
        return

    def short(path: str) -> str:
        if out == "tsv":  # no title line naming the location: the whole path
            return path
        plain = path.split("://", 1)[-1]
        base = root.split("://", 1)[-1]
        return plain[len(base) :] if plain.startswith(base) else path

    total = sum(f.size_bytes for f in files)
    print_table(
        f"{name} @ version {ds.number}: {len(entries):,} files, {size_text(total)} under {printable(mask_url(ds.location))}",
        columns,
        [
            (short(e["path"]), "?" if e["rows"] is None else f"{e['rows']:,}", size_text(e["size_bytes"]))
            for e in entries
        ],
        out,
    )


@click.command("profiles")
@json_option
@output_option
def profiles_cmd(as_json: bool, output: str | None) -> None:
    """List the named catalogs of the config file (passwords masked; ${VAR} left as written)."""
    from dal.catalog.home import config_path, default_profile, load_config, profiles

    out = output_format(as_json, output)
    as_json = out == "json"
    config = load_config()
    found = profiles(config)
    default = default_profile(config)
    if as_json:
        emit_json({"config": str(config_path()), "default": default,
                    "profiles": {n: mask_url(u) for n, u in found.items()}})  # fmt: skip
        return
    columns = ["profile", "catalog", "default"]
    if not found:
        print_empty(columns, f"no catalog profiles in {config_path()}", out)
        return
    print_table(
        f"profiles in {config_path()}",
        columns,
        [(n, mask_url(u), "default" if n == default else "") for n, u in sorted(found.items())],
        out,
    )


@click.command("tag")
@click.argument("name", shell_complete=complete_names)
@click.argument("version", shell_complete=complete_versions)
@click.argument("tag")
@click.option("--force", is_flag=True, help="Move the tag if it is on another version.")
@json_option
@click.pass_context
def tag_cmd(ctx: click.Context, name: str, version: str, tag: str, force: bool, as_json: bool) -> None:
    """Tag a version (e.g. dal tag weather.radar 3 prod)."""
    v = existing_catalog_of(ctx).tag(name, version, tag, force=force)
    if as_json:
        emit_json(v.to_dict())
    else:
        click.echo(f"{name}: tagged version {v.number} as {tag!r} (tags: {', '.join(v.tags)})")


@click.command("untag")
@click.argument("name", shell_complete=complete_names)
@click.argument("tag", shell_complete=complete_tags)
@json_option
@click.pass_context
def untag_cmd(ctx: click.Context, name: str, tag: str, as_json: bool) -> None:
    """Remove a tag from a dataset."""
    existing_catalog_of(ctx).untag(name, tag)
    if as_json:
        emit_json({"dataset": name, "removed_tag": tag, "tags": existing_catalog_of(ctx).tags(name)})
    else:
        click.echo(f"{name}: removed tag {tag!r}")


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


@click.command("rename")
@click.argument("old", shell_complete=complete_names)
@click.argument("new")
@json_option
@click.pass_context
def rename_cmd(ctx: click.Context, old: str, new: str, as_json: bool) -> None:
    """Rename a dataset (versions, tags and data stay where they are)."""
    from dal.ops import lifecycle

    info = lifecycle.rename(old, new, catalog=existing_catalog_of(ctx))
    if as_json:
        emit_json(dataset_dict(info))
    else:
        click.echo(f"renamed {old} to {new}")


@click.command("set")
@click.argument("name", shell_complete=complete_names)
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
                              properties=properties or None, catalog=existing_catalog_of(ctx))  # fmt: skip
    if as_json:
        emit_json(dataset_dict(info))
    else:
        click.echo(f"updated {name}")


#: The commands this module adds to ``dal`` (dal.cli.app registers them).
COMMANDS: tuple[click.Command, ...] = (
    ls_cmd,
    show_cmd,
    versions_cmd,
    schema_cmd,
    diff_cmd,
    partitions_cmd,
    files_cmd,
    profiles_cmd,
    tag_cmd,
    untag_cmd,
    rename_cmd,
    set_cmd,
)
