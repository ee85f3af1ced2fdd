"""The storage credentials of a write through a ``dal serve`` catalog.

A write, delete, register or sync through the server begins by telling it (``RemoteCatalog.begin_write``): the
server checks WRITE on the dataset and, where it vends storage credentials for writes there
(``dal.serve.vending.vend_write``), answers short-lived ones that read, write and delete under the dataset's
location only. They replace the caller's own credentials for that store for the whole write (its storage reads,
the claim, the intent marker, the staged files, the commit; Spark executors get them with the write's
transaction). Without them (no server, or nothing configured for writes there) the caller's own are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dal.catalog import remote
from dal.storage import uris

if TYPE_CHECKING:
    from dal.catalog import Catalog


def write_options(
    cat: Catalog, name: str, path: str | None, options: Mapping[str, str], *, read_only: bool = False
) -> dict[str, str]:
    """``options`` for a write of ``name`` (at ``path``, or its default location, when it is new): with the
    storage credentials a ``dal serve`` catalog vended for it in place of the caller's own; as they are for a
    catalog reached through its database. ``read_only``: a read-only registration, which writes nothing to
    storage (the server vends read credentials).

    Raises:
        NotAuthorized: no WRITE on ``name`` (nothing was vended or written). CatalogError: the server refuses to
        vend for that location (a bucket's root, a location overlapping a dataset the caller may not write, a
        local path on a server that forbids them).
    """
    served = remote.served(cat)
    if served is None:
        return dict(options)
    location = uris.normalize(path) if path else uris.default_location(name)
    vended = served.begin_write(name, location, read_only=read_only)
    if vended is None:
        return dict(options)
    return remote.with_vended(options, {str(k): str(v) for k, v in vended["options"].items()})
