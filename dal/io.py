"""URIs and filesystems: the only module that knows about local paths vs object stores."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from catalog.engine import data_dir
from dal.errors import DalError

ENV_WAREHOUSE = "DAL_WAREHOUSE"
StorageOptions = Mapping[str, str]


def is_local(uri: str) -> bool:
    scheme = urlsplit(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def normalize(uri: str | os.PathLike[str]) -> str:
    """A canonical location: an absolute local path, or a URL with no trailing slash.

    Raises:
        DalError: the URL carries credentials (they belong in ``storage_options``, never in the catalog).
    """
    text = os.fspath(uri)
    parts = urlsplit(text)
    if parts.username or parts.password:
        raise DalError(
            f"location {parts.scheme}://…@{parts.hostname}{parts.path} contains credentials; pass them in "
            "storage_options or the environment instead (dal never stores credentials in the catalog)"
        )
    if is_local(text):
        local = parts.path if parts.scheme == "file" else text
        return str(Path(local).expanduser().resolve())
    return text.rstrip("/")


def join(root: str, *parts: str) -> str:
    if is_local(root):
        return str(Path(root).joinpath(*parts))
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def warehouse_root() -> str:
    """Where new datasets land: ``$DAL_WAREHOUSE`` or ``<data dir>/warehouse`` (object-store URLs: issue #7)."""
    return normalize(os.environ.get(ENV_WAREHOUSE) or str(data_dir() / "warehouse"))


def default_location(name: str) -> str:
    """``<warehouse>/<dataset name>``; names are validated, so they hold no path separators."""
    return join(warehouse_root(), name)


def filesystem(uri: str, storage_options: StorageOptions | None = None) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path inside it for ``uri`` (fsspec for anything not local)."""
    if is_local(uri):
        return pafs.LocalFileSystem(), normalize(uri)
    import fsspec

    fs, path = fsspec.core.url_to_fs(uri, **dict(storage_options or {}))
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def to_uri(location: str) -> str:
    """A URL for Spark/Hadoop: local paths become ``file://`` + the raw path (Hadoop does not decode
    percent-escapes, so ``Path.as_uri()``'s ``%3D`` for ``=`` would name another file)."""
    return f"file://{normalize(location)}" if is_local(location) else location
