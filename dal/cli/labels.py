"""Labels of datasets and columns: label, unlabel, labels (``pii``, ``gold``, ``owner-team=vision``; what DataHub and
Unity Catalog call tags; dal's ``tag`` names a version)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

from dal.cli.base import existing_catalog_of, json_option, output_option, reader_of
from dal.cli.complete import complete_names
from dal.cli.output import emit_json, output_format, print_empty, print_table

if TYPE_CHECKING:
    from dal.catalog.types import Label

column_option = click.option(
    "--column", "-c", default=None, metavar="COLUMN", help="A column of the dataset's newest version, not the dataset."
)


def labels_text(labels: Iterable[Label], column: str | None = None) -> str:
    """The labels of the dataset (``column`` None) or of one column, as ``gold, owner-team=vision``."""
    return ", ".join(b.text for b in labels if b.column == column)


def _changed(name: str, labels: tuple[Label, ...], as_json: bool, done: str) -> None:
    from dal.catalog.types import labels_dict

    if as_json:
        emit_json({"dataset": name, "labels": labels_dict(labels)})
    else:
        click.echo(done)


@click.command("label")
@click.argument("name", shell_complete=complete_names)
@click.argument("labels", nargs=-1, required=True)
@column_option
@json_option
@click.pass_context
def label_cmd(ctx: click.Context, name: str, labels: tuple[str, ...], column: str | None, as_json: bool) -> None:
    """Label a dataset, or one of its columns with --column: LABELS are KEY or KEY=VALUE (pii, gold,
    owner-team=vision); a label replaces the one with the same key. Not dal tag, which names a version."""
    found = _each(ctx, labels, lambda cat, text: cat.label(name, text, column=column))
    where = f"column {column!r} of {name}" if column else name
    _changed(name, found, as_json, f"{where}: labelled {', '.join(labels)} (labels: {labels_text(found, column)})")


def _each(
    ctx: click.Context, labels: tuple[str, ...], change: Callable[[Any, str], tuple[Label, ...]]
) -> tuple[Label, ...]:
    """Every label checked before any is changed, then ``change`` for each: the labels after the last."""
    from dal.catalog.types import parse_label

    for text in labels:
        parse_label(text)
    cat = existing_catalog_of(ctx)
    found: tuple[Label, ...] = ()
    for text in labels:
        found = change(cat, text)
    return found


@click.command("unlabel")
@click.argument("name", shell_complete=complete_names)
@click.argument("labels", nargs=-1, required=True)
@column_option
@json_option
@click.pass_context
def unlabel_cmd(ctx: click.Context, name: str, labels: tuple[str, ...], column: str | None, as_json: bool) -> None:
    """Remove labels from a dataset, or from one of its columns with --column: LABELS are KEY (whatever its
    value) or KEY=VALUE."""
    found = _each(ctx, labels, lambda cat, text: cat.unlabel(name, text, column=column))
    where = f"column {column!r} of {name}" if column else name
    _changed(name, found, as_json, f"{where}: removed label {', '.join(labels)}")


@click.command("labels")
@click.argument("name", shell_complete=complete_names)
@json_option
@output_option
@click.pass_context
def labels_cmd(ctx: click.Context, name: str, as_json: bool, output: str | None) -> None:
    """Show the labels of a dataset and of its columns."""
    from dal.catalog.types import labels_dict

    out = output_format(as_json, output)
    found = reader_of(ctx).labels(name)
    if out == "json":
        emit_json({"dataset": name, "labels": labels_dict(found)})
        return
    columns = ("column", "label")
    if not found:
        print_empty(columns, f"{name} has no labels (dal label {name} LABEL)", out)
        return
    print_table(None, columns, [(b.column or "", b.text) for b in found], out)


COMMANDS: tuple[click.Command, ...] = (label_cmd, unlabel_cmd, labels_cmd)
