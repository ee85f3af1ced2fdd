"""Writes in flight: every write registers an *intent* before it stages anything, so gc and purge know the
files it is writing instead of guessing from their age.

An intent is a small JSON marker next to the data, ``<location>/_dal_intents/<write id>.json``, written by
the writing process (the Spark driver for a Spark write) before the first file is staged and deleted once
the storage commit is done (or the write failed). It names the write (id, dataset), the *token* its staged
files and directories carry (``v<n>-<token>/`` for Petastorm, ``part-<token>-…`` for Delta files staged by
Spark), and the process (host, boot id, pid namespace, pid and the pid's start time). A thread of the writer
rewrites it every ``HEARTBEAT_S`` seconds.

An intent is *live* while its marker was rewritten less than ``EXPIRES_AFTER_S`` ago — and, when the reader
runs on the same machine (same host name, boot id and pid namespace), while its process is still running:
a killed writer's intent stops counting at once on its own machine, and at most ``EXPIRES_AFTER_S`` after
its last heartbeat anywhere else. A marker that cannot be read (larger than ``MAX_MARKER_BYTES``, not JSON,
not an object, a field missing or of the wrong type or range) counts as live (protecting every unreferenced
file) until it is ``EXPIRES_AFTER_S`` old by the store's modification time; then it is expired like any other.
gc deletes expired markers. A markers' folder that is a symbolic link is refused by writes, gc and purge alike:
markers written through it would land elsewhere, and gc would count deletions it refuses to make.

A live intent claims the files whose path carries its token, and every file modified since it began, less
``TIME_SLACK_S`` (the marker's own modification time, read back from the store, so one clock — the store's —
judges both; ``CLOCK_SLACK_S`` when only the writer's clock is known): delta-rs's writer names its files
itself. gc never deletes a claimed file, whatever its age; ``safe_age`` only judges files nothing claims (a
second line of defence, for writers of older dal versions and other tools). gc looks at the intents before it
syncs the catalog, and again after it listed the files (with a second sync): a write is then committed before
the first sync (its files are referenced), or in flight at one of the looks (claimed), or committed between
them (the second sync finds it, and gc looks again).

Why a marker next to the data rather than a catalog row: every gc or purge of that location sees it whatever
catalog it works for (two catalogs may register one table), a first write has no catalog entry yet, Spark and
object stores need nothing more than they already reach, and it needs no catalog migration. Readers ignore
it (Delta, Spark and Hive skip ``_``-prefixed paths; Petastorm readers open a version's own directory).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pyarrow.fs as pafs

from dal.errors import FormatError
from dal.storage.location import Location

DIR = "_dal_intents"
HEARTBEAT_S = 30.0
EXPIRES_AFTER_S = 300.0  # no heartbeat for this long: the writer is dead (or stalled; its commit checks its files)
TIME_SLACK_S = 2.0  # file times of one store: a clock tick locally, whole seconds on S3
CLOCK_SLACK_S = 120.0  # the writer's clock against the store's (when the store gave the marker no time)
TOKEN_LENGTH = 12
MAX_MARKER_BYTES = 64 * 1024  # a marker dal writes is about 400 bytes; a larger one is not read at all
_MAX_TIME = 1e11  # seconds since the epoch (the year 5138): beyond it a marker's time is not one

_log = logging.getLogger("dal.intents")


def token_of(write_id: str) -> str:
    """The token a write's staged files and directories carry (hex, ``TOKEN_LENGTH`` characters)."""
    token = "".join(c for c in write_id.lower() if c in "0123456789abcdef")[:TOKEN_LENGTH]
    return token if len(token) == TOKEN_LENGTH else uuid.uuid4().hex[:TOKEN_LENGTH]


def is_marker(rel: str) -> bool:
    """Whether ``rel`` (a path below a dataset's location) is an intent marker dal writes."""
    return rel.split("/", 1)[0] == DIR


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> str:
    """When process ``pid`` started (clock ticks since boot, from /proc; "" where that cannot be told)."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split() if stat else []
    return fields[19] if len(fields) > 19 else ""


def _machine() -> dict[str, str]:
    """What makes a pid meaningful: host name, boot id and pid namespace ("" for what cannot be told)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return {"host": socket.gethostname(), "boot_id": _read("/proc/sys/kernel/random/boot_id"), "pid_ns": namespace}


def _decode(data: bytes) -> dict[str, Any]:
    """A marker's JSON object, parsed within bounds: a ValueError for a marker over ``MAX_MARKER_BYTES``, nested
    past the parser's recursion limit, holding NaN or Infinity, or not an object."""
    if len(data) > MAX_MARKER_BYTES:
        raise ValueError(f"larger than {MAX_MARKER_BYTES} bytes")

    def constant(name: str) -> None:
        raise ValueError(f"{name} is not a number")

    try:
        body = json.loads(data, parse_constant=constant)
    except RecursionError:  # json's C scanner guards its recursion: nothing is left half-done
        raise ValueError("nested too deeply") from None
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    return body


def _text(body: dict[str, Any], key: str, *, required: bool = False) -> str:
    value = body.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{key} must be text")
    return value


def _time(value: object, key: str) -> float:
    """A time in seconds since the epoch (a range check first: a huge integer never becomes a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < _MAX_TIME:
        raise ValueError(f"{key} must be a time")
    return float(value)


@dataclass(frozen=True)
class Intent:
    """One write in flight, as its marker describes it."""

    write_id: str
    dataset: str
    token: str
    pid: int
    pid_start: str
    machine: dict[str, str]
    started: float  # the writer's clock (seconds since the epoch)
    store_started: float | None  # the marker's first modification time, by the store's clock

    def to_json(self) -> bytes:
        body = {
            "write_id": self.write_id,
            "dataset": self.dataset,
            "token": self.token,
            "pid": self.pid,
            "pid_start": self.pid_start,
            **self.machine,
            "started": self.started,
            "store_started": self.store_started,
            "heartbeat_s": HEARTBEAT_S,
            "expires_after_s": EXPIRES_AFTER_S,
        }
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Intent:
        """The intent a marker's bytes describe; a ValueError for anything dal did not write (ill-typed, out of range)."""
        body = _decode(data)
        token = _text(body, "token", required=True)
        if len(token) < TOKEN_LENGTH:  # a shorter token would claim unrelated files
            raise ValueError(f"token {token!r} is too short")
        pid = body.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**32:
            raise ValueError("pid must be a process id")
        store_started = body.get("store_started")
        return cls(
            _text(body, "write_id", required=True),
            _text(body, "dataset"),
            token,
            pid,
            _text(body, "pid_start"),
            {k: _text(body, k) for k in ("host", "boot_id", "pid_ns")},
            _time(body.get("started"), "started"),
            None if store_started is None else _time(store_started, "store_started"),
        )

    def running_here(self, here: dict[str, str]) -> bool | None:
        """Whether the writing process still runs, when this machine can tell (None: it cannot)."""
        if not all(self.machine.get(k) and self.machine.get(k) == here[k] for k in ("host", "boot_id", "pid_ns")):
            return None
        if not self.pid_start:
            return None
        return _process_start(self.pid) == self.pid_start

    def claims(self, rel: str, modified: float) -> bool:
        """Whether this write may own ``rel`` (a path below the location, modified at ``modified``)."""
        if self.token in rel:
            return True
        if self.store_started is not None:
            return modified >= self.store_started - TIME_SLACK_S
        return modified >= self.started - CLOCK_SLACK_S

    def describe(self) -> str:
        host = self.machine.get("host") or "an unknown host"
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"write {self.write_id} of {self.dataset or 'a new dataset'} (pid {self.pid} on {host}, since {when})"


@dataclass(frozen=True)
class InFlight:
    """The writes in flight at a location when it was looked at: live intents, markers that cannot be read
    yet (each claims every file), and the markers of dead writers (gc deletes them)."""

    live: tuple[Intent, ...] = ()
    unreadable: tuple[str, ...] = ()
    expired: tuple[tuple[str, int], ...] = ()  # (marker path below the location, bytes)

    def claims(self, rel: str, age: float) -> bool:
        """Whether a write in flight may own ``rel`` (a path below the location, modified ``age`` seconds ago by
        this process's clock: only the store's own times are compared, the offset cancels)."""
        if self.unreadable:
            return True
        modified = time.time() - age
        return any(i.claims(rel, modified) for i in self.live)

    def __or__(self, other: InFlight) -> InFlight:
        """What two looks saw: a write live at either is live; a marker is expired when no look saw it live."""
        live = {i.write_id: i for i in (*self.live, *other.live)}
        expired = {e for e in (*self.expired, *other.expired) if e[0].rsplit("/", 1)[-1][:-5] not in live}
        return InFlight(
            tuple(live.values()), tuple(sorted({*self.unreadable, *other.unreadable})), tuple(sorted(expired))
        )

    def news(self, later: InFlight) -> bool:
        """Whether ``later`` saw a write (or an unreadable marker) this look did not."""
        known = {i.write_id for i in self.live}
        return any(i.write_id not in known for i in later.live) or not set(later.unreadable) <= set(self.unreadable)

    def describe(self) -> str:
        parts = [i.describe() for i in self.live] + [f"an unreadable intent marker {r}" for r in self.unreadable]
        return "; ".join(parts)


def _foreign_folder(loc: Location) -> str | None:
    """Why the markers' folder cannot hold dal's markers (None: it can, or it is not there yet): a symbolic link
    (through it markers would be written, read and deleted in another folder) or not a folder. Local disk only:
    object stores have no links."""
    if not loc.local:
        return None
    try:
        mode = os.lstat(loc.path(DIR)).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return f"the intent markers' folder {loc.child(DIR)} is a symbolic link, which dal does not follow"
    if not stat.S_ISDIR(mode):
        return f"the intent markers' folder {loc.child(DIR)} is not a folder"
    return None


def _read_marker(loc: Location, rel: str, size: int) -> bytes:
    """A marker's bytes, at most ``MAX_MARKER_BYTES`` + 1 of them (a larger one is refused unread)."""
    if size > MAX_MARKER_BYTES:
        raise ValueError(f"larger than {MAX_MARKER_BYTES} bytes")
    if loc.local:  # never through a link (a marker dal writes is a plain file), never blocking on a FIFO
        fd = os.open(loc.path(rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError("not a regular file")
            return f.read(MAX_MARKER_BYTES + 1)
    with loc.fs.open_input_stream(loc.path(rel)) as f:
        data: bytes = f.read(MAX_MARKER_BYTES + 1)
    return data


def scan(loc: Location) -> InFlight:
    """The writes in flight at ``loc`` now (one LIST of the markers, one GET per marker).

    Raises:
        FormatError: the markers' folder is a symbolic link (or not a folder).
    """
    refused = _foreign_folder(loc)
    if refused:
        raise FormatError(f"{refused}; nothing was deleted (replace it with a folder, or remove it)")
    selector = pafs.FileSelector(loc.path(DIR), recursive=False, allow_not_found=True)
    now = time.time()
    here = _machine()
    live: list[Intent] = []
    unreadable: list[str] = []
    expired: list[tuple[str, int]] = []
    for info in loc.fs.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.base_name.endswith(".json") or info.base_name.startswith("."):
            continue
        rel = f"{DIR}/{info.base_name}"
        mtime = info.mtime.timestamp() if info.mtime is not None else now
        if loc.local:  # the listing follows links: a linked marker's own age, not its target's
            try:
                mtime = os.lstat(loc.path(rel)).st_mtime
            except FileNotFoundError:
                continue
        age = now - mtime
        try:
            intent: Intent | None = Intent.from_json(_read_marker(loc, rel, int(info.size or 0)))
        except FileNotFoundError:
            continue  # the write finished meanwhile
        except (OSError, ValueError):  # not a marker dal wrote (or half of one): unreadable, see the module notes
            intent = None
        if age >= EXPIRES_AFTER_S:
            expired.append((rel, int(info.size or 0)))
        elif intent is None:
            unreadable.append(rel)
        elif intent.running_here(here) is False:
            expired.append((rel, int(info.size or 0)))
        else:
            live.append(intent)
    return InFlight(tuple(live), tuple(unreadable), tuple(sorted(expired)))


class Registration:
    """A registered intent: its marker is kept fresh by a daemon thread until ``close``."""

    def __init__(self, loc: Location, intent: Intent) -> None:
        self.loc = loc
        self.intent = intent
        self.rel = f"{DIR}/{intent.write_id}.json"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        """Write the marker with its time by the store's clock, and start the heartbeat.

        Raises:
            FormatError: the marker cannot be written, or its folder is a symbolic link (nothing was staged).
        """
        refused = _foreign_folder(self.loc)
        if refused:
            raise FormatError(f"cannot register this write at {self.loc.uri} ({refused}); nothing was committed")
        try:
            self._put(first=True)
            if not self.loc.local:  # the store's time of the marker, read back and written into it
                stamp = self.loc.fs.get_file_info(self.loc.path(self.rel)).mtime
                if stamp is not None:
                    self.intent = replace(self.intent, store_started=stamp.timestamp())
                    self._put()
        except OSError as e:
            reason = e.strerror or str(e)
            raise FormatError(f"cannot register this write at {self.loc.uri} ({reason}); nothing was committed") from e
        self._thread = threading.Thread(target=self._beat, name=f"dal-intent-{self.intent.token}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._put()
            except Exception as e:  # storage hiccup: the next beat tries again; the commit checks its files
                _log.warning("cannot refresh the intent marker %s (%s)", self.loc.child(self.rel), e)

    def _put(self, *, first: bool = False) -> None:
        for attempt in range(3):
            try:
                if self.loc.local:
                    self._put_local(first)
                else:  # one PUT: atomic on object stores
                    self.loc.write(self.rel, self.intent.to_json())
                return
            except FileNotFoundError:  # the folder was removed by a finishing writer meanwhile
                if attempt == 2:
                    raise

    def _put_local(self, first: bool) -> None:
        """A temporary file renamed over the marker (a reader never sees half of one); the first time, the
        temporary file's own creation time is the write's start by the disk's clock."""
        folder = self.loc.path(DIR)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{self.intent.write_id}.{uuid.uuid4().hex[:8]}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                if first:
                    self.intent = replace(self.intent, store_started=os.fstat(f.fileno()).st_mtime)
                f.write(self.intent.to_json())
            os.replace(tmp, self.loc.path(self.rel))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def close(self) -> None:
        """Stop the heartbeat and delete the marker (and, locally, the markers' folder when it is empty)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.loc.delete(self.rel)
        except FileNotFoundError:
            pass
        except OSError as e:  # it expires by itself
            _log.warning("cannot delete the intent marker %s (%s)", self.loc.child(self.rel), e)
        if self.loc.local:
            try:
                os.rmdir(self.loc.path(DIR))
            except OSError:
                pass  # other writers' markers are there, or it is gone


@contextmanager
def registered(loc: Location, write_id: str, dataset: str = "") -> Iterator[Registration]:
    """Register a write in flight at ``loc`` for the duration of the block (see the module notes); a local
    location the block created is removed again when the write left it empty.

    Raises:
        FormatError: the marker cannot be written (nothing was staged yet).
    """
    pid = os.getpid()
    intent = Intent(write_id, dataset, token_of(write_id), pid, _process_start(pid), _machine(), time.time(), None)
    created = loc.local and not os.path.exists(loc.path())
    reg = Registration(loc, intent)
    reg.open()
    try:
        yield reg
    finally:
        reg.close()
        if created:  # a first write that left nothing: leave no empty folder either
            try:
                os.rmdir(loc.path())
            except OSError:
                pass


__all__ = ["DIR", "EXPIRES_AFTER_S", "HEARTBEAT_S", "InFlight", "Intent", "is_marker", "registered", "scan",
           "token_of"]  # fmt: skip
