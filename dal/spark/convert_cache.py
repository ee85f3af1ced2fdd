"""The converter's cache on local disk: one entry per converted DataFrame, published atomically, shared by
processes, removed when its last user exits (or by ``dal cache clear``).

Layout under the cache root (``cache_root``)::

    <key>.ready                  the marker: JSON naming the entry's folder; created only once the folder
                                 is complete, by a hard link (create-if-absent, atomic), so a reader never
                                 sees a half-written entry
    <key>-<token>/               one conversion: catalog.db (a private SQLite catalog), table/ (the data),
                                 users/<host>-<pid> (each process using the entry)

    .dal-cache                   the sentinel: this folder is dal's converter cache (dal.storage.ownership)

A conversion killed before its marker leaves a folder that no marker names: nothing reads it, and it is
removed by the next conversion into the same root (once its writer is dead) or by ``dal cache clear``.
Only a folder dal marked as its cache is ever swept or cleared, and in it only folders and markers named as
above whose contents are a conversion's (``dal.storage.ownership``): anything else there is left alone.
Two processes converting the same DataFrame both write; the first marker wins, the other deletes its
folder and uses the winner's.

The cache may also live on object storage (``s3://``, ``gs://``, ``az://``: ``remote_*`` below, the same
protocol with a conditional PUT for the marker), shared by the machines that reach it.

Why one module: the cache's publish / claim / lease / sweep protocol (markers, sentinel, entry names) is one
protocol with one set of invariants; its deletions go through ``dal.storage.ownership``.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.fs as pafs

from dal.catalog.home import data_dir
from dal.errors import DalError
from dal.storage import ownership
from dal.storage.location import Location

ENV_CACHE_DIR = "DAL_CACHE_DIR"
MARKER = ".ready"
PUBLISH_ATTEMPTS = 20
STARTING_GRACE_S = 60.0  # a folder younger than this may still be getting its first user file

_used: dict[Path, Path] = {}  # entry folder -> root, for the atexit release
_lock = threading.Lock()
_registered = False


def cache_root(
    explicit: str | os.PathLike[str] | None = None, spark_conf: str | None = None, *, create: bool = True
) -> Path:
    """The cache folder: ``explicit`` (per call), else Spark's ``spark.dal.cacheDir``, else
    ``$DAL_CACHE_DIR``, else ``<dal home>/cache``. Only local paths (``file://`` too) are supported.

    With ``create`` the folder is made dal's cache (created, and marked with its sentinel) before anything is
    converted into it.

    Raises:
        NotOwned: (``create``) the folder holds files dal did not write: dal keeps its cache only in a folder it made.
        DalError: an object-store URL, or a folder that cannot be created."""
    raw = cache_spec(explicit, spark_conf)
    if raw.startswith("file://"):
        raw = raw[len("file://") :]
    elif "://" in raw:
        raise DalError(f"{raw!r} is on object storage: use remote_root (this is the local cache's folder)")
    root = Path(raw).expanduser()
    if not create:
        return root
    try:
        root.mkdir(parents=True, exist_ok=True)
        ownership.claim_cache_root(_loc(root), ownership.CONVERSIONS)
    except OSError as e:
        raise DalError(f"cannot create the cache folder {root} ({e.strerror or e}); set {ENV_CACHE_DIR}") from e
    return root


def _loc(root: Path) -> Location:
    return Location.of(str(root))


def cache_spec(explicit: str | os.PathLike[str] | None = None, spark_conf: str | None = None) -> str:
    """Where the cache is, as given: ``explicit``, else ``spark.dal.cacheDir``, else ``$DAL_CACHE_DIR``, else
    ``<dal home>/cache`` (a local path, or an object-store URL such as ``s3://bucket/cache``)."""
    return str(explicit or spark_conf or os.environ.get(ENV_CACHE_DIR) or data_dir() / "cache")


def _me() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _alive(user: str) -> bool:
    host, _, pid = user.rpartition("-")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's process (a shared folder): cannot tell, assume it runs
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Entry:
    """One complete, published conversion."""

    root: Path
    key: str
    folder: Path
    created: str
    rows: int | None

    @property
    def catalog_url(self) -> str:
        return f"sqlite:///{self.folder / 'catalog.db'}"

    @property
    def table(self) -> Path:
        return self.folder / "table"

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file())

    def users(self) -> list[str]:
        return _users(self.folder)


def _users(folder: Path) -> list[str]:
    try:
        return sorted(p.name for p in (folder / "users").iterdir())
    except OSError:
        return []


def _live_users(folder: Path) -> list[str]:
    return [u for u in _users(folder) if _alive(u)]


def _marker(root: Path, key: str) -> Path:
    return root / f"{key}{MARKER}"


def _read_marker(root: Path, key: str) -> dict[str, object] | None:
    try:
        data = json.loads(_marker(root, key).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def lookup(root: Path, key: str) -> Entry | None:
    """The published entry for ``key``, registered as used by this process (None: there is none)."""
    data = _read_marker(root, key)
    if data is None or not ownership.conversion_entry(str(data.get("entry")), key):
        return None  # no marker, or one that names no folder of this key's (not dal's: never used or removed)
    folder = root / str(data["entry"])
    entry = Entry(root, key, folder, str(data.get("created", "")), _int(data.get("rows")))
    _add_user(folder)
    # the marker must still name the folder after our user file exists: a last user removing the entry
    # takes the marker away first and then looks for users (see _release)
    again = _read_marker(root, key)
    if again is None or again.get("entry") != data.get("entry") or not (folder / "catalog.db").is_file():
        _remove_user(folder)
        if again is not None and again.get("entry") == data.get("entry"):
            _unpublish(root, key, folder)  # a marker naming a folder that is gone: stale
        return None
    _track(folder, root)
    return entry


def _int(v: object) -> int | None:
    return v if isinstance(v, int) else None


def begin(root: Path, key: str) -> Path:
    """A fresh folder for converting ``key`` (this process its user); abandoned conversions are swept first.

    Raises:
        NotOwned: ``root`` is not a folder dal made for its cache (see ``cache_root``)."""
    ownership.claim_cache_root(_loc(root), ownership.CONVERSIONS)
    sweep(root)
    folder = root / f"{key}-{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    _add_user(folder)  # users/ is the folder's mark: a conversion in progress
    _track(folder, root)
    return folder


def publish(root: Path, key: str, folder: Path, rows: int | None) -> Entry:
    """Publish a complete ``folder`` as the entry of ``key``; if another process published first, drop
    ``folder`` and return theirs."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    tmp = root / f".{folder.name}.marker"
    tmp.write_text(json.dumps({"entry": folder.name, "created": created, "rows": rows, "by": _me()}))
    try:
        for _ in range(PUBLISH_ATTEMPTS):
            try:
                os.link(tmp, _marker(root, key))  # atomic create-if-absent
                return Entry(root, key, folder, created, rows)
            except FileExistsError:
                theirs = lookup(root, key)
                if theirs is not None:
                    discard(folder)
                    return theirs
                # their entry went away meanwhile (its last user exited) or was stale: publish ours
    finally:
        tmp.unlink(missing_ok=True)
    discard(folder)
    raise DalError(f"could not publish the cache entry {key[:12]} in {root}: other processes keep replacing it")


def discard(folder: Path) -> None:
    """Remove an unpublished folder (a failed or losing conversion)."""
    with _lock:
        _used.pop(folder, None)
    _remove_entry(folder.parent, folder.name)


def _remove_entry(root: Path, name: str) -> bool:
    """Delete the conversion folder ``name`` under ``root`` if it is one (its name and contents are a
    conversion's), never following links; False when it is not dal's to delete."""
    path = root / name
    if not ownership.conversion_entry(name) or path.is_symlink():
        return False
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it]
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not ownership.conversion_contents(names):
        return False
    ownership.remove_tree(_loc(root), name)
    return True


def _add_user(folder: Path) -> None:
    users = folder / "users"
    try:
        users.mkdir(parents=True, exist_ok=True)
        (users / _me()).touch()
    except OSError:
        pass


def _remove_user(folder: Path) -> None:
    (folder / "users" / _me()).unlink(missing_ok=True)


def _track(folder: Path, root: Path) -> None:
    global _registered
    with _lock:
        _used[folder] = root
        if not _registered:
            atexit.register(release_all)
            _registered = True


def _unpublish(root: Path, key: str, folder: Path) -> bool:
    """Take away ``key``'s marker if it names ``folder`` (True when this call removed it)."""
    data = _read_marker(root, key)
    if data is None or data.get("entry") != folder.name:
        return False
    aside = root / f".{folder.name}.{uuid.uuid4().hex[:8]}.removing"
    try:
        os.rename(_marker(root, key), aside)
    except OSError:
        return False
    moved = json.loads(aside.read_text()) if aside.exists() else {}
    if moved.get("entry") != folder.name:  # another entry was published in between: put it back
        try:
            os.link(aside, _marker(root, key))
        except FileExistsError:
            pass
        aside.unlink(missing_ok=True)
        return False
    aside.unlink(missing_ok=True)
    return True


def _key_of(folder: Path) -> str:
    return folder.name.rsplit("-", 1)[0]


def _release(folder: Path, root: Path) -> None:
    """This process stops using ``folder``; the last live user removes the entry."""
    _remove_user(folder)
    if _live_users(folder):
        return
    key = _key_of(folder)
    removed = _unpublish(root, key, folder)
    if _live_users(folder):  # someone started using it while we took the marker away: give it back
        if removed:
            _republish(root, key, folder)
        return
    _remove_entry(root, folder.name)


def _republish(root: Path, key: str, folder: Path) -> None:
    tmp = root / f".{folder.name}.{uuid.uuid4().hex[:8]}.marker"
    tmp.write_text(json.dumps({"entry": folder.name, "created": datetime.now(UTC).isoformat(timespec="seconds")}))
    try:
        os.link(tmp, _marker(root, key))
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def release_all() -> None:
    """At exit: stop using every entry this process used (removing those no other live process uses)."""
    with _lock:
        used = list(_used.items())
        _used.clear()
        remote = list(_remote_used.items())
        _remote_used.clear()
    for folder, root in used:
        try:
            _release(folder, root)
        except OSError:
            pass
    for (_, name), loc in remote:
        try:
            _remote_release(loc, name)
        except (OSError, DalError):
            pass


def sweep(root: Path) -> list[Path]:
    """Remove conversion folders no marker names whose users are all dead (killed conversions, losers of a race).

    Raises:
        NotOwned: ``root`` is not dal's cache (no sentinel, and entries dal did not write); nothing was deleted."""
    removed: list[Path] = []
    if not ownership.check_cache_root(_loc(root), ownership.CONVERSIONS):
        return removed
    published = {e.folder.name for e in entries(root)}
    with os.scandir(root) as it:
        candidates = [e.name for e in it if ownership.conversion_entry(e.name) and e.is_dir(follow_symlinks=False)]
    for name in candidates:
        folder = root / name
        if name in published:
            continue
        try:
            young = time.time() - folder.stat().st_mtime < STARTING_GRACE_S
        except OSError:
            continue
        if _live_users(folder) or (young and not _users(folder)):
            continue
        if _remove_entry(root, name):
            removed.append(folder)
    return removed


def entries(root: Path) -> list[Entry]:
    """The published entries under ``root``, oldest first."""
    out = []
    for m in sorted(root.glob(f"*{MARKER}")):
        key = m.name[: -len(MARKER)]
        data = _read_marker(root, key)
        if data is None or not ownership.conversion_entry(str(data.get("entry")), key):
            continue  # not a marker dal wrote
        out.append(Entry(root, key, root / str(data["entry"]), str(data.get("created", "")), _int(data.get("rows"))))
    return sorted(out, key=lambda e: e.created)


def clear(root: Path, *, force: bool = False) -> tuple[list[Entry], list[Entry]]:
    """Remove the entries no live process uses (all of them with ``force``) and every abandoned folder.

    Returns (removed, kept because in use).

    Raises:
        NotOwned: ``root`` is not dal's cache (no sentinel, and entries dal did not write); nothing was deleted."""
    removed: list[Entry] = []
    kept: list[Entry] = []
    if not ownership.check_cache_root(_loc(root), ownership.CONVERSIONS):
        return removed, kept
    for e in entries(root):
        if not force and _live_users(e.folder):
            kept.append(e)
            continue
        _unpublish(root, e.key, e.folder)
        _remove_entry(root, e.folder.name)
        with _lock:
            _used.pop(e.folder, None)
        removed.append(e)
    sweep(root)
    return removed, kept


# -- a cache on object storage (``cache_dir="s3://…"``, also gs://, az://) -----------------------------------
#
# The same protocol on a Location: ``<key>.ready`` is created by a conditional PUT (create-if-absent), the
# entry's folder ``<key>-<token>/`` holds the table (no catalog: a reader registers the table in a private
# temporary catalog) and ``users/<host>-<pid>`` objects. Object stores have no rename, so taking a marker
# away is a read (does it name this folder?) then a delete; a publisher racing into that instant loses its
# marker, never its data (its process converts again on the next lookup; the folder is swept once unused).


def is_remote(location: str) -> bool:
    """Whether a cache location is a URL other than ``file://`` (an object store)."""
    return "://" in location and not location.startswith("file://")


@dataclass(frozen=True)
class RemoteEntry:
    """One complete, published conversion on object storage."""

    root: Location
    key: str
    folder: str
    created: str
    rows: int | None

    @property
    def table(self) -> str:
        return self.root.child(f"{self.folder}/table")

    def users(self) -> list[str]:
        return _remote_users(self.root, self.folder)


_remote_used: dict[tuple[str, str], Location] = {}  # (root uri, folder) -> root, for the atexit release


def remote_root(uri: str, storage_options: Mapping[str, str] | None, *, create: bool = True) -> Location:
    """The cache's Location, its filesystem reachable (checked before anything is converted); with ``create``,
    marked as dal's cache (its sentinel object) unless it is already.

    Raises:
        NotOwned: (``create``) the prefix holds objects dal did not write: dal keeps its cache only where it made it.
        DalError: an unknown scheme, a missing extra, options the store refuses."""
    from dal.storage import uris

    loc = Location.of(uri, storage_options)
    uris.filesystem(loc.uri, loc.storage_options)  # a bad URL or scheme fails here, before Spark runs
    if create:
        ownership.claim_cache_root(loc, ownership.CONVERSIONS)
    return loc


def _remote_marker(key: str) -> str:
    return f"{key}{MARKER}"


def _remote_read_marker(root: Location, key: str) -> dict[str, object] | None:
    try:
        data = json.loads(root.read(_remote_marker(key)))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _remote_users(root: Location, folder: str) -> list[str]:
    try:
        return sorted(rel for rel, _ in root.list(f"{folder}/users", recursive=False))
    except OSError:
        return []


def _remote_add_user(root: Location, folder: str) -> None:
    root.write(f"{folder}/users/{_me()}", b"")


def _remote_remove_user(root: Location, folder: str) -> None:
    try:
        root.delete(f"{folder}/users/{_me()}")
    except (FileNotFoundError, OSError):
        pass


def _remote_track(root: Location, folder: str) -> None:
    global _registered
    with _lock:
        _remote_used[(root.uri, folder)] = root
        if not _registered:
            atexit.register(release_all)
            _registered = True


def remote_lookup(root: Location, key: str) -> RemoteEntry | None:
    """The published entry for ``key``, registered as used by this process (None: there is none)."""
    data = _remote_read_marker(root, key)
    if data is None or not ownership.conversion_entry(str(data.get("entry")), key):
        return None
    folder = str(data["entry"])
    entry = RemoteEntry(root, key, folder, str(data.get("created", "")), _int(data.get("rows")))
    _remote_add_user(root, folder)
    again = _remote_read_marker(root, key)  # still published after our user object exists (see _remote_release)
    if again is None or again.get("entry") != folder or not root.exists(f"{folder}/table"):
        _remote_remove_user(root, folder)
        if again is not None and again.get("entry") == folder:
            _remote_unpublish(root, key, folder)  # a marker naming a folder that is gone: stale
        return None
    _remote_track(root, folder)
    return entry


def remote_begin(root: Location, key: str) -> str:
    """A fresh folder for converting ``key`` (this process its user); abandoned folders are swept first.

    Raises:
        NotOwned: ``root`` is not a prefix dal made for its cache (see ``remote_root``)."""
    ownership.claim_cache_root(root, ownership.CONVERSIONS)
    remote_sweep(root)
    folder = f"{key}-{uuid.uuid4().hex[:12]}"
    _remote_add_user(root, folder)
    _remote_track(root, folder)
    return folder


def remote_publish(root: Location, key: str, folder: str, rows: int | None) -> RemoteEntry:
    """Publish a complete ``folder`` as the entry of ``key`` (one conditional PUT); if another process
    published first, drop ``folder`` and return theirs."""
    created = datetime.now(UTC).isoformat(timespec="seconds")
    record = json.dumps({"entry": folder, "created": created, "rows": rows, "by": _me()}).encode()
    for _ in range(PUBLISH_ATTEMPTS):
        if root.create_exclusive(_remote_marker(key), record):
            return RemoteEntry(root, key, folder, created, rows)
        theirs = remote_lookup(root, key)
        if theirs is not None:
            remote_discard(root, folder)
            return theirs
    remote_discard(root, folder)
    raise DalError(f"could not publish the cache entry {key[:12]} in {root.uri}: other processes keep replacing it")


def remote_discard(root: Location, folder: str) -> None:
    """Remove an unpublished folder (a failed or losing conversion)."""
    with _lock:
        _remote_used.pop((root.uri, folder), None)
    _remote_remove_entry(root, folder)


def _remote_remove_entry(root: Location, folder: str) -> bool:
    """Delete the conversion folder ``folder`` if it is one (its name and objects are a conversion's)."""
    if not ownership.conversion_entry(folder):
        return False
    try:
        names = {rel.split("/", 1)[0] for rel, _ in root.list(folder)}
    except OSError:
        return False
    if not ownership.conversion_contents(names):
        return False
    ownership.remove_tree(root, folder)
    return True


def _remote_unpublish(root: Location, key: str, folder: str) -> bool:
    data = _remote_read_marker(root, key)
    if data is None or data.get("entry") != folder:
        return False
    try:
        root.delete(_remote_marker(key))
    except (FileNotFoundError, OSError):
        return False
    return True


def _remote_release(root: Location, folder: str) -> None:
    """This process stops using ``folder``; the last live user removes the entry."""
    _remote_remove_user(root, folder)
    if any(_alive(u) for u in _remote_users(root, folder)):
        return
    key = folder.rsplit("-", 1)[0]
    removed = _remote_unpublish(root, key, folder)
    if any(_alive(u) for u in _remote_users(root, folder)):  # someone started using it meanwhile: give it back
        if removed:
            record = json.dumps({"entry": folder, "created": datetime.now(UTC).isoformat(timespec="seconds")})
            root.create_exclusive(_remote_marker(key), record.encode())
        return
    _remote_remove_entry(root, folder)


def remote_entries(root: Location) -> list[RemoteEntry]:
    """The published entries under ``root``, oldest first."""
    out = []
    for rel, _ in root.list("", recursive=False):
        if ownership.CONVERSION_FILES.fullmatch(rel) and rel.endswith(MARKER):
            key = rel[: -len(MARKER)]
            data = _remote_read_marker(root, key)
            if data is not None and ownership.conversion_entry(str(data.get("entry")), key):
                out.append(RemoteEntry(root, key, str(data.get("entry", "")), str(data.get("created", "")),
                                       _int(data.get("rows"))))  # fmt: skip
    return sorted(out, key=lambda e: e.created)


def remote_sweep(root: Location) -> list[str]:
    """Remove conversion folders no marker names whose users are all dead (killed conversions, losers of a race).

    Raises:
        NotOwned: ``root`` is not dal's cache (no sentinel, and objects dal did not write); nothing was deleted."""
    if not ownership.check_cache_root(root, ownership.CONVERSIONS):
        return []
    published = {e.folder for e in remote_entries(root)}
    folders: dict[str, float] = {}
    foreign: set[str] = set()
    for info in root.fs.get_file_info(pafs.FileSelector(root.path(), recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(root.path()) :].lstrip("/")
        top, _, inner = rel.partition("/")
        if not inner or top in published or not ownership.conversion_entry(top):
            continue
        if not ownership.conversion_contents([inner.split("/", 1)[0]]):
            foreign.add(top)  # holds an object no conversion writes: not dal's to delete
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        folders[top] = max(folders.get(top, 0.0), mtime)
    removed = []
    for folder, newest in folders.items():
        users = _remote_users(root, folder)
        if (
            folder in foreign
            or any(_alive(u) for u in users)
            or (not users and time.time() - newest < STARTING_GRACE_S)
        ):
            continue
        if _remote_remove_entry(root, folder):
            removed.append(folder)
    return removed


def remote_clear(root: Location, *, force: bool = False) -> tuple[list[RemoteEntry], list[RemoteEntry]]:
    """As ``clear`` for a cache on object storage.

    Raises:
        NotOwned: ``root`` is not dal's cache (no sentinel, and objects dal did not write); nothing was deleted."""
    removed: list[RemoteEntry] = []
    kept: list[RemoteEntry] = []
    if not ownership.check_cache_root(root, ownership.CONVERSIONS):
        return removed, kept
    for e in remote_entries(root):
        if not force and any(_alive(u) for u in e.users()):
            kept.append(e)
            continue
        _remote_unpublish(root, e.key, e.folder)
        _remote_remove_entry(root, e.folder)
        with _lock:
            _remote_used.pop((root.uri, e.folder), None)
        removed.append(e)
    remote_sweep(root)
    return removed, kept
