"""``dal ui``: a read-only catalog web app and JSON API (``pip install 'dal-catalog[ui]'``).

Nothing here is imported by ``import dal``; ``serve`` checks the extra is installed and names the pip
command when it is not.
"""

from __future__ import annotations

from dal.catalog import Catalog
from dal.errors import DalError, require
from dal.listen import check_can_listen, is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def serve(cat: Catalog, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, token: str | None = None) -> None:
    """Serve the catalog on ``host:port`` until interrupted (Ctrl-C)."""
    for module in ("starlette", "jinja2", "uvicorn"):
        require(module, "ui")
    import uvicorn

    from dal.ui.app import create_app

    if token is not None and not token.strip():
        raise DalError("--token must not be empty")
    check_can_listen("dal ui", host, port)
    loopback = is_loopback(host)
    app = create_app(cat, token=token, loopback=loopback)
    # no access log: a ?token=… in a request line would be written to it
    config = uvicorn.Config(app, host=host, port=port, access_log=False, log_level="warning", server_header=False)
    server = uvicorn.Server(config)
    where = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
    print(f"dal ui: serving {cat!r} read-only on {where} (Ctrl-C stops it)", flush=True)
    if not loopback and token is None:
        print(
            "dal ui: warning: listening beyond this machine without --token: anyone who can reach it can read the catalog",
            flush=True,
        )
    server.run()
