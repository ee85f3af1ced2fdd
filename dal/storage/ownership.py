"""What dal may delete, and which paths named by metadata it may read: the one place that decides.

**The rule: dal deletes, reads and writes only what it can prove belongs to the dataset or cache it was asked
about.** Every delete and every path read from a table's metadata goes through this module, on local disk and
on object storage alike:

1. *Cache roots.* A folder is one of dal's caches only if dal marked it: a ``.dal-cache`` sentinel (JSON naming
   the kind of cache) written when dal first uses the folder. dal marks only a folder that is new, empty, or
   whose every entry already follows that cache's layout (a cache left by a release before sentinels).
   Clearing or sweeping any other folder is ``NotOwned`` and deletes nothing; so is a root marked for the
   other kind of cache.
2. *Cache entries.* Inside a root, only names dal writes are candidates (``<40 hex>-<12 hex>/`` for a
   conversion, ``v1/<2 hex>/<64 hex>/<offset>-<length>`` for a cached byte range, ...), and a conversion
   folder only while everything in it is what a conversion writes.
3. *Listings for deletion never follow symbolic links.* A linked directory is reported, never descended into;
   deleting a linked file removes the link, never its target; no file is deleted through a linked directory.
   Directories are removed only when empty, except a cache entry proven dal's (removed without following
   links).
4. *Paths from metadata resolve under the table root.* Relative paths are percent-decoded (when the format
   encodes them) and joined; absolute ones, local paths or URLs, must lie inside the root on the same store. A
   path that leaves the root (``..``, another directory, another bucket) is a ``FormatError`` naming the table
   and the entry: dal reads nothing there, and gc never counts it as the table's.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from dal.errors import FormatError, NotOwned
from dal.storage import uris
from dal.storage.claims import FILE as CLAIM_FILE
from dal.storage.location import Location

_log = logging.getLogger("dal.ownership")

# -- 1, 2: cache roots and their entries ---------------------------------------------------------------------

SENTINEL = ".dal-cache"
_SENTINEL_TMP = re.compile(r"\.\.dal-cache\.[0-9a-f]{12}\.tmp")  # Location.create_exclusive's temporary file
_CONVERSION = r"[0-9a-f]{40}-[0-9a-f]{12}"  # <plan key>-<token>
CONVERSION_ENTRY = re.compile(_CONVERSION)
CONVERSION_FILES = re.compile(  # the marker, and the temporary names publishing / unpublishing use
    rf"[0-9a-f]{{40}}\.ready|\.{_CONVERSION}\.marker|\.{_CONVERSION}\.[0-9a-f]{{8}}\.(?:marker|removing)"
)
# what a conversion folder holds: its private catalog (and SQLite's side files), the table, its users
CONVERSION_PARTS = frozenset({"catalog.db", "catalog.db-journal", "catalog.db-wal", "catalog.db-shm", "table", "users"})
RANGE_SHARD = re.compile(r"[0-9a-f]{2}")
RANGE_FOLDER = re.compile(r"[0-9a-f]{64}")
RANGE_FILE = re.compile(r"\d+-\d+|meta\.json|\.tmp-(?:\d+-\d+|meta\.json)-[0-9a-f]{12}")


@dataclass(frozen=True)
class CacheLayout:
    """One kind of cache: its name in the sentinel, and the top-level names it writes."""

    kind: str
    title: str
    dirs: re.Pattern[str]
    files: re.Pattern[str]

    def follows(self, name: str, is_dir: bool) -> bool:
        """Whether a top-level entry (``is_dir``: a real directory, not a link) is one this cache writes."""
        if name == SENTINEL or _SENTINEL_TMP.fullmatch(name):
            return not is_dir
        return (self.dirs if is_dir else self.files).fullmatch(name) is not None


CONVERSIONS = CacheLayout("conversions", "converter cache", CONVERSION_ENTRY, CONVERSION_FILES)
RANGES = CacheLayout("ranges", "file cache", re.compile(r"v1"), re.compile(r"(?!)"))


def _sentinel(root: Location) -> str | None:
    """The kind named by the root's sentinel; None when there is none, "" when it is not dal's (unreadable,
    a link, a folder)."""
    if root.local:
        path = root.path(SENTINEL)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                return ""
            with open(path, "rb") as f:
                data = f.read(4096)
        except FileNotFoundError:
            return None
        except OSError:
            return ""
    else:
        try:
            data = root.read(SENTINEL)
        except FileNotFoundError:
            return None
        except OSError:
            return "" if root.exists(SENTINEL) else None
    try:
        kind = json.loads(data).get("dal_cache")
    except (ValueError, AttributeError):
        return ""
    return kind if isinstance(kind, str) else ""


def _children(root: Location) -> list[tuple[str, bool]]:
    """(name, is a real directory) of the root's entries (a link is never a directory); [] when absent."""
    if root.local:
        try:
            with os.scandir(root.path()) as it:
                return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except (FileNotFoundError, NotADirectoryError):
            return []
    selector = pafs.FileSelector(root.path(), recursive=False, allow_not_found=True)
    return [(i.base_name, i.type == pafs.FileType.Directory) for i in root.fs.get_file_info(selector)]


def _judge(root: Location, layout: CacheLayout) -> tuple[str, str]:
    """("marked" | "legacy" | "empty", "") for a root dal may use as ``layout``'s cache, else ("", why not)."""
    where = uris.mask_url(root.uri)
    if root.local and os.path.exists(root.path()) and not os.path.isdir(root.path()):
        return "", f"{where} is not a folder, so not a dal {layout.title}"
    kind = _sentinel(root)
    if kind == layout.kind:
        return "marked", ""
    if kind is not None:
        other = next((c.title for c in (CONVERSIONS, RANGES) if c.kind == kind), None)
        what = f"it is dal's {other}, not its {layout.title}" if other else f"its {SENTINEL} is not dal's"
        return "", f"{where} is not a dal {layout.title}: {what}"
    children = _children(root)
    foreign = sorted(n + ("/" if d else "") for n, d in children if not layout.follows(n, d))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        return "", (
            f"{where} is not a dal {layout.title}: it has no {SENTINEL} marker and holds entries dal did not "
            f"write ({shown})"
        )
    return ("legacy" if children else "empty"), ""


def check_cache_root(root: Location, layout: CacheLayout) -> bool:
    """Whether ``root`` holds a cache of ``layout``'s kind that dal may clear: True when marked by its sentinel,
    or unmarked with every entry in the layout (a cache a release before sentinels made); False when absent
    or empty (nothing to delete).

    Raises:
        NotOwned: anything else (a folder dal did not make, the other kind of cache); nothing was deleted.
    """
    state, why = _judge(root, layout)
    if why:
        raise NotOwned(f"{why}; nothing was deleted")
    return state != "empty"


def claim_cache_root(root: Location, layout: CacheLayout) -> None:
    """Make ``root`` dal's cache of ``layout``'s kind before dal first writes there: created if absent, marked with
    the sentinel when new, empty or in the layout already.

    Raises:
        NotOwned: the folder holds what dal did not write, or is the other kind of cache (name a new folder).
        OSError: the folder or the sentinel cannot be written.
    """
    state, why = _judge(root, layout)
    if why:
        raise NotOwned(f"{why}: dal keeps its {layout.title} only in a folder it made; name a new or empty folder")
    if state == "marked":
        return
    root.makedirs("")
    body = {"dal_cache": layout.kind, "created": datetime.now(UTC).isoformat(timespec="seconds")}
    if not root.create_exclusive(SENTINEL, json.dumps(body).encode()) and _sentinel(root) != layout.kind:
        raise NotOwned(
            f"{uris.mask_url(root.uri)}: another {SENTINEL} appeared while dal marked it as its {layout.title}"
        )


def conversion_entry(name: str, key: str | None = None) -> bool:
    """Whether ``name`` is a conversion folder's name (of ``key``'s conversions, when given)."""
    return CONVERSION_ENTRY.fullmatch(name) is not None and (key is None or name.startswith(f"{key}-"))


def conversion_contents(names: Iterable[str]) -> bool:
    """Whether a conversion folder's top-level names are all what a conversion writes."""
    return set(names) <= CONVERSION_PARTS


# -- 3: listing and deleting without following links ---------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """A file below a location: its path there, bytes, seconds since it was modified (infinite when the store
    does not say), and whether it is a symbolic link (deleting it removes the link only)."""

    rel: str
    size: int
    age: float
    link: bool = False


@dataclass(frozen=True)
class Listing:
    """Every file below a location, the linked directories found there (reported, never descended into), and
    the nested locations: folders below it that hold a claim file (``dal.storage.claims.FILE``) or what marks a
    table's root in the format, i.e. another dataset's location, of whatever catalog or tool (their files are
    left out: never the outer dataset's to delete)."""

    files: tuple[Listed, ...]
    linked_dirs: tuple[str, ...] = ()
    nested: tuple[str, ...] = ()


def _without_nested(files: Iterable[Listed], linked: tuple[str, ...] = (), roots: Iterable[str] = ()) -> Listing:
    """The listing with every folder below the root that holds a claim file or one of the folders named in
    ``roots`` (another dataset's location) left out."""
    files = sorted(files, key=lambda f: f.rel)
    nested = {f.rel.rpartition("/")[0] for f in files if f.rel.endswith(f"/{CLAIM_FILE}")}
    for marker in roots:
        nested |= {f.rel.partition(f"/{marker}/")[0] for f in files if f"/{marker}/" in f.rel}
    # outermost ones only (a location nested in a nested one is inside it anyway)
    outer = sorted(d for d in nested if not any(d.startswith(f"{o}/") for o in nested if o != d))
    if not outer:
        return Listing(tuple(files), linked)
    kept = tuple(f for f in files if not any(f.rel.startswith(f"{d}/") for d in outer))
    return Listing(kept, linked, tuple(outer))


def listing(loc: Location, roots: Iterable[str] = ()) -> Listing:
    """Everything below ``loc`` (hidden files too) without following links, sorted; one recursive LIST on object
    stores (which have no links). A folder below ``loc`` that holds a claim file, or a folder named in ``roots``
    (what marks a table's root in the format, ``Format.table_roots``), is another dataset's location: its files
    are left out and the folder reported (``Listing.nested``)."""
    now = time.time()
    if not loc.local:
        base = loc.path().rstrip("/") + "/"
        found = []
        for fi in loc.fs.get_file_info(pafs.FileSelector(loc.path(), recursive=True, allow_not_found=True)):
            if fi.type == pafs.FileType.File:
                rel = fi.path[len(base) :] if fi.path.startswith(base) else fi.path
                age = now - fi.mtime.timestamp() if fi.mtime is not None else float("inf")
                found.append(Listed(rel, int(fi.size or 0), age))
        return _without_nested(found, roots=roots)
    files: list[Listed] = []
    linked: list[str] = []
    pending = [""]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(loc.path(folder)) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            rel = f"{folder}/{e.name}" if folder else e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                if os.path.isdir(e.path):
                    linked.append(rel)
                else:  # a link to a file (or a dangling one): deleting it removes the link
                    files.append(Listed(rel, st.st_size, now - st.st_mtime, link=True))
            elif stat.S_ISDIR(st.st_mode):
                pending.append(rel)
            elif stat.S_ISREG(st.st_mode):
                files.append(Listed(rel, st.st_size, now - st.st_mtime))
    return _without_nested(files, tuple(sorted(linked)), roots)


def _relative(rel: str) -> str:
    """``rel`` as a clean path below a location; a ValueError for '', '.', '..' segments or an absolute path."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in rel:
        raise ValueError(f"not a path below a location: {rel!r}")
    return rel


def _through_link(loc: Location, rel: str) -> bool:
    """Whether a folder on the way from ``loc`` to ``rel`` is a symbolic link (local disk)."""
    parts = rel.split("/")[:-1]
    for i in range(len(parts)):
        try:
            if stat.S_ISLNK(os.lstat(loc.path("/".join(parts[: i + 1]))).st_mode):
                return True
        except FileNotFoundError:
            return False
    return False


def remove_file(loc: Location, rel: str) -> bool:
    """Delete the file ``rel`` below ``loc`` (a link: the link itself), never through a linked folder.

    Returns whether a file was deleted (False: it was not there, or only reachable through a link)."""
    _relative(rel)
    if loc.local and _through_link(loc, rel):
        _log.warning("%s: %s is reached through a symbolic link; dal does not delete it", loc.uri, rel)
        return False
    try:
        loc.delete(rel)
    except FileNotFoundError:
        return False
    return True


def remove_tree(loc: Location, rel: str) -> None:
    """Delete the folder ``rel`` below ``loc`` and everything in it without following links (a link at ``rel``:
    the link only). Only for what the caller proved dal's (a cache entry, a write's own directory)."""
    _relative(rel)
    if not loc.local:
        loc.delete_dir(rel)
        return
    if _through_link(loc, rel):
        return
    path = loc.path(rel)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        os.unlink(path)
        return
    shutil.rmtree(path, ignore_errors=True)  # never follows links (shutil.rmtree.avoids_symlink_attacks)


def remove_empty_dirs(loc: Location, spare: Callable[[str], bool] = lambda rel: False) -> None:
    """Local disk only: remove the directories left empty below ``loc``, and ``loc`` itself, except those ``spare``
    keeps (it gets each one's path below the location, "" for the location). Links are never followed or removed."""
    if not loc.local:
        return
    top = loc.path()
    for dirpath, _dirs, _files in os.walk(top, topdown=False):  # os.walk does not descend into links
        rel = os.path.relpath(dirpath, top).replace(os.sep, "/")
        if spare("" if rel == "." else rel):
            continue
        try:
            os.rmdir(dirpath)  # only succeeds when empty
        except OSError:
            pass


# -- 4: paths named by metadata ------------------------------------------------------------------------------

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: "C:" is a drive
_SAME_STORE = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "gcs": "gs", "azure": "az"}


def _segments(path: str) -> list[str] | None:
    """The segments of a '/'-separated path with '.' and empty ones dropped and '..' applied; None when '..'
    climbs above its start."""
    out: list[str] = []
    for s in path.split("/"):
        if s in ("", "."):
            continue
        if s == "..":
            if not out:
                return None
            out.pop()
        else:
            out.append(s)
    return out


def _local_path(root: str) -> str:
    """A local root as a path (``file:///x`` as ``/x``: table libraries name roots by URL)."""
    return unquote(urlsplit(root).path) if root[:5].lower() == "file:" else root


def _below(root: str, path: str, encoded: bool) -> tuple[str | None, str]:
    """(``path`` relative to ``root``, "") or (None, why it is not inside). Only an encoded path (a URI
    reference, as Delta logs hold) can be a URL; an unencoded one is a file path."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return None, "is not a path"
    if (
        path[0] not in "./"
        and path[-1] != "/"
        and "%" not in path
        and ":" not in path
        and "//" not in path
        and "/." not in path
    ):
        return path, ""  # the common case, a plain relative path: nothing to decode or resolve
    local = uris.is_local(root)
    if encoded and _SCHEME.match(path):  # an absolute URL: the same store, inside the root's path
        parts = urlsplit(path)
        scheme = _SAME_STORE.get(parts.scheme.lower(), parts.scheme.lower())
        if local:
            same = scheme == "file" and parts.netloc in ("", "localhost")
            base = _local_path(root)
        else:
            r = urlsplit(root)
            same = scheme == _SAME_STORE.get(r.scheme.lower(), r.scheme.lower()) and parts.netloc == r.netloc
            base = r.path
        if not same:
            return None, "is on another store"
        target = unquote(parts.path)
    elif path.startswith("/"):  # an absolute path: the root's own store only when that is local disk
        if not local:
            return None, "is an absolute path, not one in the table's store"
        base, target = _local_path(root), unquote(path) if encoded else path
    else:
        rel = _segments(unquote(path) if encoded else path)
        if rel is None:
            return None, "leaves the table's root (..)"
        return ("/".join(rel), "") if rel else (None, "is the table's root itself")
    want, got = _segments(base), _segments(target)
    if got is None or want is None or got[: len(want)] != want:
        return None, "is outside the table's root"
    rest = got[len(want) :]
    return ("/".join(rest), "") if rest else (None, "is the table's root itself")


def inside(root: str, path: str, *, encoded: bool = True) -> str | None:
    """``path`` (as metadata names it: relative to ``root`` or absolute; percent-encoded when ``encoded``) as a
    '/'-separated path below ``root``; None when it lies outside (gc then never counts it as the table's)."""
    return _below(root, path, encoded)[0]


def below(root: str, path: str, *, table: str, entry: str, encoded: bool = True) -> str:
    """As :func:`inside`, refusing a path outside ``root``.

    Raises:
        FormatError: naming the table (``table``: its name or location) and the metadata entry (``entry``).
    """
    rel, why = _below(root, path, encoded)
    if rel is None:
        shown = path if isinstance(path, str) and len(path) <= 200 else f"{str(path)[:200]}…"
        raise FormatError(f"{table}: {entry} names {shown!r}, which {why}; dal reads nothing outside a table's root")
    return rel


# what makes a path need more than the plain-relative check of ``_below``: anything to decode or resolve
_NOT_PLAIN = r"^$|^[./]|/$|%|:|//|/\.|\x00"


def below_all(root: str, paths: pa.Array, *, table: str, entry: str) -> pa.Array:
    """:func:`below` for a column of encoded paths (a log's add actions) at once: plain relative paths, the
    common case, are checked in one vectorised pass; the others one by one.

    Raises:
        FormatError: a path leaves the root (naming the table and the entry).
    """
    import pyarrow.compute as pc

    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks()
    if paths.null_count:
        below(root, "", table=table, entry=entry)  # raises: a missing path is not a path
    matched = pc.match_substring_regex(paths, _NOT_PLAIN)
    if not pc.any(matched).as_py():  # no numpy here: pyarrow's to_numpy imports pandas (~0.25 s CPU)
        return paths
    special = matched.to_numpy(zero_copy_only=False)
    out = paths.to_pylist()
    for i in special.nonzero()[0]:
        out[i] = below(root, out[i], table=table, entry=entry)
    return pa.array(out, pa.string())


def resolve(root: str, path: str, *, table: str, entry: str, encoded: bool = True) -> str:
    """The URI of a path metadata names, inside ``root`` (see :func:`below`).

    Raises:
        FormatError: the path leaves the root (naming the table and the entry).
    """
    return uris.join(root, *below(root, path, table=table, entry=entry, encoded=encoded).split("/"))


__all__ = ["CONVERSIONS", "RANGES", "SENTINEL", "CacheLayout", "Listed", "Listing", "below", "below_all", "check_cache_root",
           "claim_cache_root", "conversion_contents", "conversion_entry", "inside", "listing", "remove_empty_dirs",
           "remove_file", "remove_tree", "resolve"]  # fmt: skip
