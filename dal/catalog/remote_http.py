"""HTTP details of the ``dal serve`` client (``dal.catalog.remote``) that keep its token where it belongs: no
redirect is followed (the ``Authorization`` header would go along to wherever it points), a server URL with user
info is refused (a token pasted there would be printed and sent as a host name), and a token that no request can
carry (a newline, a control character) is a local error, not a connection failure retried four times."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from dal.catalog.errors import CatalogError

TOKEN_TEXT = re.compile(r"[\x21-\x7e]+")  # what a bearer token can be: visible ASCII, no space, no line break


def check_url(url: str, env_token: str) -> None:
    """Refuse a server URL with user info (``https://TOKEN@host``): a token goes in ``$DAL_TOKEN`` or
    ``dal auth login``, never the URL (where it is printed, logged, and sent as the host name)."""
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        raise CatalogError(
            f"the catalog server URL {parts.scheme}://***@{parts.netloc.rpartition('@')[2]} carries user info: "
            f"give the token in ${env_token} or with `dal auth login`, not in the URL"
        )


def origin(location: str, base: str) -> str:
    """Where a redirect points, as scheme://host:port only (never its path, query or user info)."""
    try:
        parts = urllib.parse.urlsplit(urllib.parse.urljoin(base + "/", location))
        return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "an unreadable Location"


def no_redirects(context: Any) -> Any:
    """An opener that follows no redirect (a 3xx comes back as an ``HTTPError``)."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(NoRedirect(), urllib.request.HTTPSHandler(context=context))
