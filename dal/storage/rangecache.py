"""A local disk cache of what reads fetch from object storage: ``dal.open(name, version, cache="local")``.

Training reads the same immutable files every epoch; on object stores each epoch pays every GET again.
With the cache, the byte ranges the first epoch reads (Parquet footers and the column chunks of the
projection, exactly as pyarrow asks for them) are kept on local disk and later epochs read them from
there. Versions are immutable — a data file never changes under a pinned version — so nothing is ever
invalidated, only evicted under a size bound.

Layout under the cache root (``<dal home>/filecache``, ``$DAL_FILE_CACHE_DIR`` or ``cache_dir=``)::

    v1/<hh>/<sha256 of (store, path)>/meta.json       {"path": …, "store": …, "size": …}
    v1/<hh>/<sha256 of (store, path)>/<offset>-<length>   one complete byte range of that file
    v1/<hh>/<…>/.tmp-<offset>-<length>-<token>          a range being written (never read)

- A range is written to a temporary file and renamed into place, so a reader (any process) sees it
  complete or not at all; a fill killed half way leaves only a ``.tmp-`` file, which is never read and is
  removed by a later eviction pass once it is an hour old. A range file whose size is not its length is
  ignored and removed.
- Two processes may fill the same range at once: both renames carry the same bytes.
- Eviction is least-recently-used by range (a hit refreshes the range's mtime, once per reader), down to 90 %
  of the bound, and never removes a range used since the oldest cached reader open in this process
  started (its epoch's working set). When the working set is larger than the bound, the cache keeps what it
  holds and stops storing: the rest is read from storage every epoch (evicting would throw away, each
  epoch, exactly the ranges needed next: every read a miss).
- A file whose size no longer matches what the cache recorded (a path rewritten: never by dal) is dropped.
- The root is dal's only once marked (``.dal-cache``, written when a reader first uses it, see
  ``dal.storage.ownership``): eviction and ``clear`` delete only the names above, in such a root, never
  following a link.

Why one module: one cache protocol (byte ranges, eviction, cross-process locking and its ownership sentinel)
whose invariants are easiest to review in one place.
"""

from __future__ import annotations

import contextlib
import hashlib
import io as _io
import json
import logging
import math
import os
import pickle
import re
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from dal._testhooks import pause
from dal.catalog.home import data_dir
from dal.errors import DalError
from dal.storage import ownership
from dal.storage.location import Location

ENV_DIR = "DAL_FILE_CACHE_DIR"
ENV_SIZE = "DAL_CACHE_SIZE"
DEFAULT_SIZE = 10 * 1024**3
LAYOUT = "v1"
LOW_WATER = 0.9  # eviction frees down to this fraction of the bound
TEMP_GRACE_S = 3600.0
CLOCK_MARGIN_S = 10.0
OPEN_FILES = 256  # remote files a reader keeps open (each saves a HEAD when read again)  # a temporary file older than this belongs to a dead fill
MODES = ("local",)

_log = logging.getLogger("dal.storage.rangecache")
_RANGE = re.compile(r"^(\d+)-(\d+)$")
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}  # fmt: skip


def parse_size(value: int | str | None) -> int:
    """A byte count: an int, or a string such as ``'500MB'``, ``'20GiB'``; None: ``$DAL_CACHE_SIZE``, else 10 GiB.

    Raises:
        DalError: not a positive size.
    """
    if value is None:
        value = os.environ.get(ENV_SIZE) or DEFAULT_SIZE
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DalError(f"cache_size must be a byte count (int) or a string such as '20GB', not {type(value).__name__}")
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
        unit = m.group(2).lower() if m else ""
        if m is None or unit not in _UNITS:
            raise DalError(f"cache_size {value!r} is not a size such as 500MB, 20GB or 1GiB")
        amount = float(m.group(1)) * _UNITS[unit]
        if not math.isfinite(amount):  # 400 digits: int() of an infinite float raised OverflowError
            raise DalError(f"cache_size {value[:40]!r}… is larger than any size")
        value = int(amount)
    if value < 1:
        raise DalError(f"cache_size must be positive, not {value}")
    return value


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The cache root: ``explicit``, else ``$DAL_FILE_CACHE_DIR``, else ``<dal home>/filecache`` (local only)."""
    raw = os.fspath(explicit) if explicit is not None else (os.environ.get(ENV_DIR) or str(data_dir() / "filecache"))
    if not isinstance(raw, str) or not raw:
        raise DalError(f"cache_dir must be a local folder, not {raw!r}")
    if raw.startswith("file://"):
        raw = raw[len("file://") :]
    elif "://" in raw:
        raise DalError(f"cache_dir must be a local folder (the cache keeps remote data on local disk), not {raw!r}")
    return Path(raw).expanduser().resolve()


@dataclass
class Stats:
    """What this reader's cache did in this process (DataLoader workers count their own)."""

    hits: int = 0
    misses: int = 0
    bytes_from_cache: int = 0
    bytes_fetched: int = 0
    bytes_stored: int = 0
    not_stored: int = 0  # ranges read from storage but not kept (the bound was reached)


class _Store:
    """One cache root as seen by this process: the ranges known per file, the bytes used (an estimate
    between eviction passes), a lock. Shared by every reader of that root in the process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.Lock()
        self.ranges: dict[Path, list[tuple[int, int]]] = {}
        self.sizes: dict[Path, int] = {}
        self.usage: int | None = None
        # admitted ranges not yet ``stored``: their files (temporary, final) -> bytes. Pending, counted as such
        # by an eviction pass, which therefore does not count those files again when it finds them on disk
        self.writing: dict[tuple[str, ...], int] = {}
        self.evict_lock = threading.Lock()
        self.real: set[Path] = set()  # range folders checked to be real directories (no link on the way)

    # -- files and ranges -------------------------------------------------------------------------

    def folder(self, store: str, path: str) -> Path:
        digest = hashlib.sha256(f"{store}\0{path}".encode()).hexdigest()
        return self.root / LAYOUT / digest[:2] / digest

    def load(self, folder: Path, *, again: bool = False) -> list[tuple[int, int]]:
        """The complete ranges of a file (read from disk once, or again to see other processes' fills)."""
        with self.lock:
            known = self.ranges.get(folder)
        if known is not None and not again:
            return known
        found = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                m = _RANGE.match(entry.name)
                if m:
                    found.append((int(m.group(1)), int(m.group(2))))
        found.sort()
        with self.lock:
            self.ranges[folder] = found
        return found

    def size_of(self, folder: Path) -> int | None:
        with self.lock:
            if folder in self.sizes:
                return self.sizes[folder]
        try:
            size = int(json.loads((folder / "meta.json").read_text())["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        with self.lock:
            self.sizes[folder] = size
        return size

    def record_size(self, folder: Path, store: str, path: str, size: int) -> None:
        """Note the file's size (from storage); a different size than recorded drops the cached ranges."""
        known = self.size_of(folder)
        if known == size:
            return
        if known is not None:  # rewritten in place: what we hold is of another file
            _log.warning("cached ranges of %s dropped: its size changed (%d -> %d bytes)", path, known, size)
            self.drop(folder)
        if not self.prepare(folder):
            return
        _write_atomic(folder, "meta.json", json.dumps({"store": store, "path": path, "size": size}).encode())
        with self.lock:
            self.sizes[folder] = size

    def prepare(self, folder: Path) -> bool:
        """Create ``folder`` (``v1/<shard>/<file>`` under the root) if needed; False when a folder on the way is a
        symbolic link (dal writes and deletes nothing through a link: the range is then not stored)."""
        if folder in self.real:
            return True
        for p in (self.root / LAYOUT, folder.parent, folder):  # one level at a time: never created through a link
            if not p.is_symlink() and not p.is_dir():
                with contextlib.suppress(FileExistsError):
                    p.mkdir()
            if p.is_symlink() or not p.is_dir():
                _log.warning("file cache %s: %s is a symbolic link; nothing is stored through it", self.root, p)
                return False
        with self.lock:
            self.real.add(folder)
        return True

    def drop(self, folder: Path) -> None:
        if folder.is_symlink() or folder.parent.is_symlink() or (self.root / LAYOUT).is_symlink():
            return
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                if ownership.RANGE_FILE.fullmatch(entry.name) and not entry.is_dir(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        with self.lock:
            self.ranges.pop(folder, None)
            self.sizes.pop(folder, None)

    def forget(self, folder: Path, rng: tuple[int, int]) -> None:
        with self.lock:
            known = self.ranges.get(folder)
            if known is not None and rng in known:
                known.remove(rng)

    def add(self, folder: Path, rng: tuple[int, int]) -> None:
        with self.lock:
            known = self.ranges.setdefault(folder, [])
            if rng not in known:
                known.append(rng)
                known.sort()

    # -- the bound --------------------------------------------------------------------------------

    def walk(self) -> Iterator[os.DirEntry[str]]:
        """The files of the layout (ranges, meta.json, temporary files) under the root, never through a link."""
        base = self.root / LAYOUT
        if base.is_symlink():
            return
        with contextlib.suppress(OSError):
            for shard in os.scandir(base):
                if not (ownership.RANGE_SHARD.fullmatch(shard.name) and shard.is_dir(follow_symlinks=False)):
                    continue
                with contextlib.suppress(OSError):
                    for folder in os.scandir(shard.path):
                        if not (ownership.RANGE_FOLDER.fullmatch(folder.name) and folder.is_dir(follow_symlinks=False)):
                            continue
                        with contextlib.suppress(OSError):
                            for entry in os.scandir(folder.path):
                                if ownership.RANGE_FILE.fullmatch(entry.name) and not entry.is_dir(
                                    follow_symlinks=False
                                ):
                                    yield entry

    def admit(self, nbytes: int, limit: int, protect_since: float, paths: tuple[str, ...]) -> bool:
        """Whether ``nbytes`` more may be stored under ``limit``, evicting unprotected ranges (LRU) if needed.
        An admitted range is counted as pending until ``stored`` is called for it; ``paths`` are the files it
        will be written as (its temporary and final names), which an eviction pass meanwhile does not count."""
        if nbytes > limit:
            return False
        with self.lock:
            if self.usage is not None and self.usage + nbytes <= limit:
                self._pend(nbytes, paths)
                return True
        with self.evict_lock:  # one pass at a time: concurrent passes would each undercount the other's
            with self.lock:
                if self.usage is not None and self.usage + nbytes <= limit:
                    self._pend(nbytes, paths)
                    return True
                writing = dict(self.writing)  # admitted, maybe not (wholly) on disk yet
            pending = sum(writing.values())
            used = self.evict(limit, nbytes + pending, protect_since, frozenset(p for ps in writing for p in ps))
            used += pending
            with self.lock:
                self.usage = used
                if used + nbytes > limit:
                    return False
                self._pend(nbytes, paths)
                return True

    def _pend(self, nbytes: int, paths: tuple[str, ...]) -> None:
        """Count an admitted range (the caller holds ``lock``)."""
        assert self.usage is not None
        self.usage += nbytes
        self.writing[paths] = nbytes

    def stored(self, paths: tuple[str, ...]) -> None:
        """An admitted range is on disk (or failed): no longer pending."""
        with self.lock:
            self.writing.pop(paths, None)

    def evict(self, limit: int, incoming: int, protect_since: float, writing: frozenset[str] = frozenset()) -> int:
        """One pass over the whole root: remove dead temporary files and, if over the bound, the least
        recently used ranges not used since ``protect_since``. Returns the bytes left, not counting the files
        in ``writing`` (ranges this process is writing: the caller counts them as pending)."""
        now = time.time()
        ranges: list[tuple[float, int, str]] = []
        total = 0
        for entry in self.walk():
            if entry.path in writing:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.name.startswith(".tmp-"):
                if now - st.st_mtime > TEMP_GRACE_S:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                    continue
                total += st.st_size
            elif _RANGE.match(entry.name):
                total += st.st_size
                ranges.append((st.st_mtime, st.st_size, entry.path))
        if total + incoming <= limit:
            return total
        target = int(limit * LOW_WATER) - incoming
        ranges.sort()
        evicted = 0
        for mtime, size, path in ranges:
            if total <= target or mtime >= protect_since:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            total -= size
            evicted += 1
            folder = Path(path).parent
            m = _RANGE.match(Path(path).name)
            if m:
                self.forget(folder, (int(m.group(1)), int(m.group(2))))
        if evicted:
            _log.debug("file cache %s: evicted %d ranges, %d bytes left", self.root, evicted, total)
        return total


_stores: dict[Path, _Store] = {}
_stores_lock = threading.Lock()
_readers: weakref.WeakSet[FileCache] = weakref.WeakSet()


def _after_fork() -> None:
    """A forked child starts with fresh locks (another thread may have held one at the fork) and opens its
    own remote files."""
    global _stores_lock
    _stores_lock = threading.Lock()
    for st in list(_stores.values()):
        st.lock, st.evict_lock, st.writing = threading.Lock(), threading.Lock(), {}
    for reader in list(_readers):
        reader._lock = threading.Lock()
        reader._remote = OrderedDict()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _store(root: Path) -> _Store:
    with _stores_lock:
        if root not in _stores:
            _stores[root] = _Store(root)
        return _stores[root]


def _protect_since() -> float:
    """Ranges used since the oldest live cached reader in this process started are its working set."""
    started = [r.started for r in list(_readers)]
    return min(started) if started else time.time()


def _temporary(folder: Path, name: str) -> Path:
    return folder / f".tmp-{name}-{uuid.uuid4().hex[:12]}"


def _write_atomic(folder: Path, name: str, data: bytes, tmp: Path | None = None) -> None:
    tmp = tmp or _temporary(folder, name)
    with open(tmp, "wb") as f:
        f.write(data)
    pause("filecache-range-written")  # fault tests kill a filling reader here: the range is not published
    try:
        os.replace(tmp, folder / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class FileCache:
    """One cached reader (one ``dal.open(…, cache="local")``): the bound, the start of its working set, its
    stats. Pickles (DataLoader workers share the same root on disk)."""

    def __init__(self, root: Path, max_bytes: int, started: float | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes
        # minus a margin: file mtimes come from the kernel's coarse clock, which lags time.time()
        self.started = time.time() - CLOCK_MARGIN_S if started is None else started
        self._init()

    def _init(self) -> None:
        self.store = _store(self.root)
        self.stats = Stats()
        self._touched: set[str] = set()
        self._lock = threading.Lock()
        self._full = False
        self._remote: OrderedDict[tuple[str, str], pa.NativeFile] = OrderedDict()
        _readers.add(self)

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "max_bytes": self.max_bytes, "started": self.started}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init()

    def __repr__(self) -> str:
        return f"FileCache({str(self.root)!r}, max_bytes={self.max_bytes})"

    @classmethod
    def create(cls, root: str | os.PathLike[str] | None, size: int | str | None) -> FileCache:
        """Validated arguments of ``dal.open``; the root is created and marked as dal's file cache.

        Raises:
            NotOwned: the folder holds files dal did not write (dal keeps its cache only in a folder it made).
            DalError: a bad size, a remote or unusable folder."""
        limit = parse_size(size)
        folder = cache_dir(root)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            ownership.claim_cache_root(Location.of(str(folder)), ownership.RANGES)
            (folder / LAYOUT).mkdir(exist_ok=True)
        except OSError as e:
            raise DalError(f"cannot create the file cache folder {folder} ({e.strerror or e}); set {ENV_DIR}") from e
        return cls(folder, limit)

    def wrap(self, fs: pafs.FileSystem, store: str) -> pafs.FileSystem:
        """``fs`` with ``open_input_file`` served from the cache (paths unchanged); ``store`` names the
        storage (scheme and endpoint) so equal paths on two stores never share cached bytes."""
        return pafs.PyFileSystem(CachingHandler(self, fs, store))

    # -- reading ----------------------------------------------------------------------------------

    def remote(self, inner: pafs.FileSystem, store: str, path: str) -> pa.NativeFile:
        """The remote file, opened once per reader (one HEAD per file on object stores; ranged reads of an
        open file are thread-safe)."""
        key = (store, path)
        with self._lock:
            found = self._remote.get(key)
            if found is not None:
                self._remote.move_to_end(key)
                return found
        opened = inner.open_input_file(path)
        with self._lock:
            found = self._remote.setdefault(key, opened)
            while len(self._remote) > OPEN_FILES:  # not closed: a file still reading it keeps it
                self._remote.popitem(last=False)
        if found is not opened:
            opened.close()
        return found

    def _touch(self, path: str) -> None:
        if path in self._touched:
            return
        with contextlib.suppress(OSError):
            os.utime(path)
        with self._lock:
            self._touched.add(path)

    def read(self, folder: Path, start: int, end: int, fetch: Any) -> bytes:
        """Bytes [start, end) of the file cached in ``folder``: from a cached range covering them, else
        fetched (``fetch(start, end)``) and stored when the bound allows."""
        if end <= start:
            return b""
        for again in (False, True):  # the second look sees ranges other processes filled meanwhile
            for off, length in self.store.load(folder, again=again):
                if off <= start and end <= off + length:
                    data = self._read_range(folder, off, length, start, end)
                    if data is not None:
                        with self._lock:
                            self.stats.hits += 1
                            self.stats.bytes_from_cache += len(data)
                        return data
        data = fetch(start, end)
        with self._lock:
            self.stats.misses += 1
            self.stats.bytes_fetched += len(data)
        if len(data) == end - start:
            self._store_range(folder, start, data)
        return bytes(data)

    def _read_range(self, folder: Path, off: int, length: int, start: int, end: int) -> bytes | None:
        path = folder / f"{off}-{length}"
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size != length:
                    raise ValueError("truncated")
                f.seek(start - off)
                data = f.read(end - start)
        except FileNotFoundError:  # evicted by another process
            self.store.forget(folder, (off, length))
            return None
        except (OSError, ValueError):
            self.store.forget(folder, (off, length))
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        if len(data) != end - start:
            return None
        self._touch(str(path))
        return data

    def _store_range(self, folder: Path, start: int, data: bytes) -> None:
        name = f"{start}-{len(data)}"
        tmp = _temporary(folder, name)
        paths = (str(tmp), str(folder / name))
        if self._full or not self.store.admit(len(data), self.max_bytes, _protect_since(), paths):
            if not self._full:
                _log.info(
                    "file cache %s is full (%d bytes) of data this epoch reads: the rest is read from storage",
                    self.root,
                    self.max_bytes,
                )
            self._full = True
            with self._lock:
                self.stats.not_stored += 1
            return
        try:
            if not self.store.prepare(folder):
                return
            _write_atomic(folder, name, data, tmp)
        except OSError as e:  # a full disk must not fail the read
            _log.warning("file cache %s: could not store a range (%s)", self.root, e)
            return
        finally:
            self.store.stored(paths)
        self._touched.add(str(folder / name))
        self.store.add(folder, (start, len(data)))
        with self._lock:
            self.stats.bytes_stored += len(data)


class CachingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """A pyarrow filesystem handler over ``inner``: random-access reads through the cache, everything else
    passed on (listing, streams: what formats read of their logs and manifests is not cached)."""

    def __init__(self, cache: FileCache, inner: pafs.FileSystem, store: str) -> None:
        self.cache = cache
        self.inner = inner
        self.store = store
        self._pid = os.getpid()

    def remote_fs(self) -> pafs.FileSystem:
        """``inner``, made afresh in a forked child (a DataLoader worker): the parent's S3 client would share
        its pooled connections with the other children, mixing their responses."""
        if self._pid != os.getpid():
            self.inner = pickle.loads(pickle.dumps(self.inner))
            self._pid = os.getpid()
        return self.inner

    def __reduce__(self) -> Any:
        return (CachingHandler, (self.cache, self.inner, self.store))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CachingHandler) and (other.inner, other.store) == (self.inner, self.store)

    def __hash__(self) -> int:
        return hash(self.store)

    def get_type_name(self) -> str:
        return f"dal-cache+{self.inner.type_name}"

    def normalize_path(self, path: str) -> str:
        return str(self.inner.normalize_path(path))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        out: list[pafs.FileInfo | None] = []
        unknown = []
        for p in paths:
            size = self.cache.store.size_of(self.cache.store.folder(self.store, p))
            out.append(pafs.FileInfo(p, pafs.FileType.File, size=size) if size is not None else None)
            if size is None:
                unknown.append(p)
        found = iter(self.inner.get_file_info(unknown) if unknown else [])
        return [o if o is not None else next(found) for o in out]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return list(self.inner.get_file_info(selector))

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(_CachedFile(self, path), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.inner.open_input_stream(path)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self.inner.delete_dir_contents("/", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self.inner.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.inner.copy_file(src, dest)

    def open_output_stream(self, path: str, metadata: Mapping[str, str] | None = None) -> pa.NativeFile:
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Mapping[str, str] | None = None) -> pa.NativeFile:
        return self.inner.open_append_stream(path, metadata=metadata)


class _CachedFile(_io.RawIOBase):
    """A read-only file for ``pa.PythonFile``: its size from the cache (no request) or storage, its bytes
    from cached ranges or ranged reads of the remote file (opened on the first miss)."""

    def __init__(self, handler: CachingHandler, path: str) -> None:
        super().__init__()
        self.handler = handler
        self.path = path
        self.cache = handler.cache
        self.folder = self.cache.store.folder(handler.store, path)
        self._remote: pa.NativeFile | None = None
        self._size = self.cache.store.size_of(self.folder)
        self._pos = 0

    def _open_remote(self) -> pa.NativeFile:
        if self._remote is None:
            self._remote = self.cache.remote(self.handler.remote_fs(), self.handler.store, self.path)
            size = int(self._remote.size())
            self.cache.store.record_size(self.folder, self.handler.store, self.path, size)
            self._size = size
        return self._remote

    def size(self) -> int:
        if self._size is None:
            self._open_remote()
        assert self._size is not None
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            self._pos = offset
        elif whence == 1:
            self._pos += offset
        elif whence == 2:
            self._pos = self.size() + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        return self._pos

    def _fetch(self, start: int, end: int) -> bytes:
        data = self._open_remote().read_at(end - start, start)
        return bytes(data)

    def read(self, size: int | None = -1) -> bytes:
        total = self.size()
        start = min(self._pos, total)
        end = total if size is None or size < 0 else min(total, start + size)
        data = self.cache.read(self.folder, start, end, self._fetch)
        self._pos = start + len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._remote = None  # shared by the reader's files (FileCache.remote)
        super().close()


class ReadOptions(dict[str, str]):
    """A reader's storage options (the user's keys, unchanged: they still reach table libraries and Spark) carrying
    its file cache, which ``dal.storage.uris.filesystem`` wraps around remote filesystems, and, for credentials a
    ``dal serve`` pin vended, when they expire (``dal.storage.uris.check_vended`` refuses them after)."""

    file_cache: FileCache | None = None
    expires: str | None = None  # ISO time, UTC: vended credentials stop working then
    vended_for: str = ""  # the dataset and version they were vended for, for the error

    @classmethod
    def of(
        cls,
        options: Mapping[str, str] | None,
        file_cache: FileCache | None,
        expires: str | None = None,
        vended_for: str = "",
    ) -> ReadOptions:
        out = cls(options or {})
        out.file_cache, out.expires, out.vended_for = file_cache, expires, vended_for
        return out

    def __reduce__(self) -> Any:  # DataLoader workers and spawned processes get the same options, never a new pin
        return (ReadOptions.of, (dict(self), self.file_cache, self.expires, self.vended_for))


def of(options: Mapping[str, str] | None) -> FileCache | None:
    """The file cache a reader's options carry (None: uncached)."""
    cache = getattr(options, "file_cache", None)
    return cache if isinstance(cache, FileCache) else None


def clear(root: str | os.PathLike[str] | None = None) -> int:
    """Remove every cached range under the cache root (``cache_dir`` rules); returns the bytes freed.
    Safe while readers run: they read what is gone from storage again.

    Raises:
        NotOwned: the folder is not dal's file cache (no sentinel, and files dal did not write); nothing was deleted."""
    folder = cache_dir(root)
    if not ownership.check_cache_root(Location.of(str(folder)), ownership.RANGES):
        return 0
    store = _store(folder)
    freed = 0
    for entry in list(store.walk()):
        with contextlib.suppress(OSError):
            freed += entry.stat(follow_symlinks=False).st_size
            os.unlink(entry.path)
    with store.lock:
        store.ranges.clear()
        store.sizes.clear()
        store.usage = None
    return freed


def usage(root: str | os.PathLike[str] | None = None) -> int:
    """Bytes of complete ranges under the cache root."""
    return sum(e.stat(follow_symlinks=False).st_size for e in _store(cache_dir(root)).walk() if _RANGE.match(e.name))
