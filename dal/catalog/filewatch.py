"""Noticing that an SQLite catalog file was replaced or deleted under a running process.

A connection stays on the file it opened: after ``os.replace`` (a restore from a backup, another catalog moved
in) or a delete, it goes on reading the old file's rows, and writes into a file nobody will see again. Each
handle on an SQLite file (``Catalog``'s engine, ``dal.catalog.lite``'s reader) keeps a ``Watched``: the identity
(device, inode) of the file its connections opened, compared with the path's at every use (one ``stat``). The
inode cannot be reused while a connection holds the old file open, so another identity means another file.

SQLite finds a WAL database's ``-wal`` and ``-shm`` files by name, and does not remove them once the database
file has moved: the old file's log stays beside the new file, and a connection to the new file would read the
old file's pages from it (and checkpoint them into the new file). So when the file changed, ``retire`` first
empties that log into the old file through a connection of this process that is still on it
(``PRAGMA wal_checkpoint(TRUNCATE)``), then closes *every* connection of this process to the old file, before
anything connects to the new one. Another process that holds the old file open and keeps writing to it is
beyond this: replace a catalog file only when no writer has it open (SQLite's "How To Corrupt", section 2.4).

No SQLAlchemy here (``dal.catalog.lite`` uses it).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from dal.catalog.errors import CatalogUnavailable
from dal.catalog.urls import mask_url

FileId = tuple[int, int]
FLUSH_WAIT_MS = 10_000  # how long emptying the old file's log waits for readers of it

_lock = threading.Lock()
_watched: dict[str, weakref.WeakSet[Watched]] = {}


def file_id(path: str) -> FileId | None:
    """The identity (device, inode) of the file at ``path``; None when there is none (or it cannot be seen)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def checkpoint(conn: Any) -> bool | None:
    """Empty the write-ahead log of the file a DB-API sqlite3 connection is on into that file: True when done,
    False when other connections kept it busy, None when this connection cannot (closed, or read-only: what it
    reads then is what any new connection would read)."""
    try:
        conn.execute(f"PRAGMA busy_timeout = {FLUSH_WAIT_MS}")
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except Exception as e:
        if type(e).__name__ == "ProgrammingError" or "readonly" in str(e):
            return None
        return False  # locked (another thread's transaction on it), busy
    return bool(busy == 0)


class Watched:
    """One handle's SQLite file: the identity of the file its connections opened, checked at each use.

    Args:
        path: the file.
        url: the catalog URL, for messages.
        flush: empties the log of the file given (an identity) through a connection of the handle on that
            file: True when done, False when it could not, None when it has none.
        drop: closes every connection the handle holds (its next use connects anew).
    """

    def __init__(self, path: str, url: str, flush: Callable[[FileId], bool | None], drop: Callable[[], None]) -> None:
        self.path = os.path.abspath(path)
        self.url = url
        self.flush = flush
        self.drop = drop
        self._opened: FileId | None = None
        self.known = False  # whether the handle ever had a file (a missing one is news only then)
        with _lock:
            _watched.setdefault(self.path, weakref.WeakSet()).add(self)

    @property
    def opened(self) -> FileId | None:
        """The file the handle's connections opened; None: none known to be on any file (the next check
        connects anew)."""
        return self._opened

    @opened.setter
    def opened(self, value: FileId | None) -> None:
        self._opened = value
        self.known = self.known or value is not None

    def check(self) -> bool:
        """Whether the handle must connect anew: True once the file at the path is another than the one its
        connections opened (they are closed then, as are those of every other handle of this process on it).

        Raises:
            CatalogUnavailable: no file at the path any more (nothing is created: a read or a write after a
                delete must not start an empty catalog, nor go on in a file nobody sees), or the old file's log
                could not be emptied (see the module's docstring).
        """
        now = file_id(self.path)
        if now is not None and now == self.opened:
            return False
        if now is None and not self.known:
            return False  # never had a file: the handle creates one, or says there is none, as before
        retire(self.path, now, self.url)
        if now is None:
            raise CatalogUnavailable(
                f"the catalog file {self.path} ({mask_url(self.url)}) was deleted or moved away while this process "
                "had it open; nothing was read or written. Put the file back, or point --catalog / "
                "DAL_CATALOG_URL at where it is now"
            )
        self.opened = now
        return True


def retire(path: str, now: FileId | None, url: str) -> None:
    """Empty the old file's log, then close the connections of every handle of this process on ``path`` whose
    file is not ``now`` (the one at the path), before any of them connects again.

    Raises:
        CatalogUnavailable: a connection on the old file could not empty its log (nothing was closed: the next
            use tries again).
    """
    with _lock:
        holders = [w for w in _watched.get(os.path.abspath(path), ()) if w.opened != now]
    # outside the registry's lock: a handle's flush and drop may wait for a query of its own to end
    for old in {w.opened for w in holders if w.opened is not None}:
        tried = []
        for w in holders:
            if w.opened == old:
                tried.append(w.flush(old))
                if tried[-1]:
                    break  # one connection empties the log for all
        if False in tried and True not in tried:
            raise CatalogUnavailable(
                f"the catalog file {path} ({mask_url(url)}) was replaced or deleted while this process had it open, "
                f"and the old file's write-ahead log ({path}-wal) could not be emptied (another connection is "
                "using it); nothing was read from the new file, which that log would mix with the old one's "
                "pages. Try again; if it persists, stop the processes that have the old catalog open"
            )
    for w in holders:
        w.drop()
        w.opened = None
