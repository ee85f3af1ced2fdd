"""A dataset's directory on any filesystem — local disk, S3, or an fsspec URL (gs://, abfs://, memory://).

The few operations a format needs to commit immutable versions without a rename: list, read, write, copy
(a hard link on local disk, a server-side copy on object stores), move, delete, and *create if absent*
— the one atomic step: ``O_EXCL`` locally, a conditional PUT (``If-None-Match: *``) on S3, GCS and Azure
(through obstore, the Python face of the ``object_store`` crate delta-rs uses), ``open(mode="xb")`` for
other fsspec filesystems.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from dal._testhooks import pause
from dal.errors import DalError, require
from dal.storage import uris


@dataclass(frozen=True)
class Location:
    """The directory ``uri`` (normalised) and the options to reach it; paths below it are '/'-separated."""

    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, uri: str, storage_options: Mapping[str, str] | None = None) -> Location:
        return cls(uris.normalize(uri), dict(storage_options or {}))

    @cached_property
    def _fs(self) -> tuple[pafs.FileSystem, str]:
        return uris.filesystem(self.uri, self.storage_options)

    @property
    def fs(self) -> pafs.FileSystem:
        return self._fs[0]

    @property
    def local(self) -> bool:
        return uris.is_local(self.uri)

    def path(self, rel: str = "") -> str:
        """The path of ``rel`` inside :attr:`fs`."""
        root = self._fs[1]
        return f"{root}/{rel.strip('/')}" if rel.strip("/") else root

    def path_of(self, uri: str) -> str:
        """The path in :attr:`fs` of ``uri``: joined as a string when it lies below this location (whose root was
        resolved once), else resolved on its own."""
        base = self.uri.rstrip("/\\") + (os.sep if self.local else "/")
        if uri.startswith(base) and len(uri) > len(base):
            rel = uri[len(base) :]
            return self.path(rel.replace(os.sep, "/") if self.local else rel)
        return uris.filesystem(uri, self.storage_options)[1]

    def child(self, rel: str) -> str:
        """The URI of ``rel`` (what readers and the catalog see)."""
        return uris.join(self.uri, *[p for p in rel.split("/") if p])

    # -- reading ------------------------------------------------------------------------------------

    def exists(self, rel: str) -> bool:
        return bool(self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound)

    def list(self, rel: str = "", *, recursive: bool = True) -> Iterator[tuple[str, int]]:
        """Files below ``rel`` as (path relative to ``rel``, size); one LIST per 1000 keys on object stores."""
        base = self.path(rel)
        selector = pafs.FileSelector(base, recursive=recursive, allow_not_found=True)
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                yield info.path[len(base) :].lstrip("/"), int(info.size or 0)

    def read(self, rel: str) -> bytes:
        with self.fs.open_input_stream(self.path(rel)) as f:
            data: bytes = f.read()
        return data

    # -- writing ------------------------------------------------------------------------------------

    def makedirs(self, rel: str) -> None:
        """Local directories; object stores have none (pyarrow would leave empty marker objects)."""
        if self.local:
            self.fs.create_dir(self.path(rel), recursive=True)

    def write(self, rel: str, data: bytes) -> None:
        self.makedirs(rel.rsplit("/", 1)[0] if "/" in rel else "")
        with self.fs.open_output_stream(self.path(rel)) as f:
            f.write(data)

    def copy(self, src: str, dst: str) -> None:
        """``dst`` gets ``src``'s bytes without rewriting them: a hard link locally (a copy across devices),
        a server-side copy on S3 (CopyObject) and on fsspec stores that offer one."""
        self.makedirs(dst.rsplit("/", 1)[0] if "/" in dst else "")
        if self.local:
            try:
                os.link(self.path(src), self.path(dst))
                return
            except OSError:
                pass
        self.fs.copy_file(self.path(src), self.path(dst))

    def move(self, src: str, dst: str) -> None:
        """A rename locally; copy then delete on object stores (no rename there)."""
        self.makedirs(dst.rsplit("/", 1)[0] if "/" in dst else "")
        try:
            self.fs.move(self.path(src), self.path(dst))
        except NotImplementedError:  # pyarrow's Azure without hierarchical namespace (arrow#40405)
            self.fs.copy_file(self.path(src), self.path(dst))
            self.fs.delete_file(self.path(src))

    def delete(self, rel: str) -> None:
        self.fs.delete_file(self.path(rel))

    def delete_dir(self, rel: str) -> None:
        try:
            self.fs.delete_dir(self.path(rel))
        except (FileNotFoundError, OSError):
            pass

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Publish ``data`` at ``rel`` only if nothing is there yet; False if something is (another writer won).

        Never visible half-written: locally the bytes go to a hidden temporary file first (written and
        fsynced), which is then hard-linked to ``rel`` — ``link`` fails if ``rel`` exists, so it is the
        atomic create-if-absent; object stores take the whole bytes in one conditional PUT; other fsspec
        stores get them in one ``xb`` write.

        Raises:
            OSError: the bytes could not be written (disk full, permissions): nothing was published.
            DalError: the filesystem has no atomic create-if-absent (dal refuses rather than risk lost commits).
        """
        self.makedirs(rel.rsplit("/", 1)[0] if "/" in rel else "")
        if self.local:
            return _link_exclusive(self.path(rel), data)
        store = uris.provider(self.uri)
        if store is not None:
            return _conditional_put(self, rel, data, store)
        import fsspec
        from fsspec.implementations.memory import MemoryFileSystem

        fs, root = fsspec.core.url_to_fs(self.uri, **dict(self.storage_options))
        path = f"{root.rstrip('/')}/{rel}"
        try:
            if isinstance(fs, MemoryFileSystem):  # publishes the complete bytes in one step
                fs.pipe_file(path, data, mode="create")
            else:
                with fs.open(path, "xb") as f:
                    f.write(data)
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError) as e:
            raise DalError(
                f"{urlsplit(self.uri).scheme}:// has no atomic create-if-absent in fsspec ({e}); dal cannot commit versions there safely"
            ) from e
        return True


def _link_exclusive(final: str, data: bytes) -> bool:
    """Write ``data`` to a temporary file beside ``final``, fsync it, then ``link`` it to ``final``."""
    folder, name = os.path.split(final)
    tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        pause("record-written")
        try:
            os.link(tmp, final)
        except FileExistsError:
            return False
        _fsync_dir(folder)
        return True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the link itself is already atomic
    finally:
        os.close(fd)


def _conditional_put(loc: Location, rel: str, data: bytes, provider: str) -> bool:
    obstore = require("obstore", "cloud")
    from obstore.exceptions import AlreadyExistsError
    from obstore.store import from_url

    config, client = _obstore_config(loc.storage_options, provider)
    make: Any = from_url  # typed per provider; the config keys are checked by obstore at run time
    store = make(loc.uri, config=config, client_options=client)
    try:  # mode='create' is one conditional PUT of the complete bytes (never a multipart upload)
        obstore.put(store, rel, data, mode="create", use_multipart=False)
    except AlreadyExistsError:
        return False
    return True


def _obstore_config(options: Mapping[str, str], provider: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The options delta-rs gets (``uris.object_store_options``: obstore is the same object_store crate, same keys) as
    obstore's config — lower-case, this provider's keys only (it panics on others) — and client options.
    obstore reads the environment itself for what is not given."""
    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    for key, value in (uris.object_store_options(options) or {}).items():
        k = key.lower()
        if k == f"{provider}_allow_http":
            client["allow_http"] = value.lower() == "true"
        elif k.startswith(f"{provider}_"):
            config[k] = value
    return config, client
