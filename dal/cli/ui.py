"""Serve the read-only web UI and JSON API (dal ui; needs dal-catalog[ui])."""

from __future__ import annotations

import click

from dal.cli.base import State


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--token", envvar="DAL_UI_TOKEN", default=None, help="Require this bearer token ($DAL_UI_TOKEN).")
@click.pass_context
def ui_cmd(ctx: click.Context, host: str, port: int, token: str | None) -> None:
    """Serve a read-only web page and JSON API over the catalog (needs dal-catalog[ui])."""
    from dal.ui import serve

    # a server answers request after request: it keeps a few PostgreSQL connections open (catalog.engine)
    cat = ctx.ensure_object(State).catalog(must_exist=True, pooled=True)
    serve(cat, host=host, port=port, token=token)
