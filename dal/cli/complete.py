"""Shell completion of dataset names, versions and tags (``eval "$(_DAL_COMPLETE=bash_source dal)"``).

Completion reads the catalog through ``dal.catalog.lite`` only: it never creates, migrates or waits for a catalog,
and never prints a traceback into the shell.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click
from click.shell_completion import CompletionItem

from dal.catalog.home import default_url

if TYPE_CHECKING:
    from dal.catalog.lite import LiteCatalog


def complete_names(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
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


def complete_versions(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
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


def complete_tags(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [c for c in complete_versions(ctx, _param, incomplete) if c.help and c.help.startswith("version ")]


def _completion_reader(ctx: click.Context) -> LiteCatalog | None:
    """The quick reader of the catalog the command line names (``--catalog`` or the default), or None: completion
    never creates, migrates or waits for a catalog."""
    from dal.catalog import lite

    url = ctx.find_root().params.get("catalog_url") or default_url()
    return lite.connect(url, wait=False)


COMPLETION_LIMIT = 200
