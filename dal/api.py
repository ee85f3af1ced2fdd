"""The public functions: the default catalog, and (as formats land) open / write / register / sync."""

from __future__ import annotations

import threading

from catalog import Catalog, default_url

_catalogs: dict[str, Catalog] = {}
_lock = threading.Lock()


def get_catalog(url: str | None = None) -> Catalog:
    """The catalog at ``url`` (default ``$DAL_CATALOG_URL`` or the embedded SQLite file), opened once per process."""
    key = url or default_url()
    with _lock:
        if key not in _catalogs:
            _catalogs[key] = Catalog(key)
        return _catalogs[key]
