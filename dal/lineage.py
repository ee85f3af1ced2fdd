"""Lineage: what produced each version, recorded by ``dal.write``.

A write records, under the ``lineage`` key of the new version's properties, who wrote it (user, host, time,
dal version), from where (the git commit of the calling program's repository, and whether it was dirty; the
Spark application id and master for Spark writes) and its inputs (``upstream``), each marked with how it is
known; the catalog also keeps one indexed edge per input (``Catalog.record_lineage``), which is what
``upstream``/``downstream`` queries read.

Which inputs:

- **declared**: ``dal.write(..., inputs=[...])`` (or ``with dal.lineage.inputs(...):`` around writes) names
  them: exactly those are recorded, nothing else.
- **inferred** (no ``inputs``): the dataset versions this process read *since its previous write*: each
  ``dal.open`` and each read of a scan (``to_arrow``, ``iter_batches``, ``to_torch``, ``count``, ... with the
  filter it was read through), made after the previous successful ``dal.write`` of this process (or of the
  enclosing ``with dal.lineage.scope():``), in the order first read. A write that fails does not end the
  window (its retry sees the same reads). So a script that opens A and B and then writes X from A and Y
  from B records X <- A, B and Y <- nothing, unless Y reads B again after X (then Y <- B): declare the inputs
  to be exact.
- ``with dal.lineage.scope():`` gives the code inside its own window: reads made inside are seen only by
  writes inside (and reads made before it are not), in this thread or task (a ``contextvars`` scope).

``read_log()`` is unchanged by writes: every (dataset, version, filters) this process opened or read through
a filter, to log with a model. Records keep the name a dataset had when it was read; the catalog's edges
point at the dataset itself, so both directions follow ``rename``. Credentials are never recorded: storage
options are not kept, and URLs are masked.
"""

from __future__ import annotations

import contextvars
import getpass
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dal.catalog import VersionInfo, VersionRef
from dal.catalog.types import DECLARED, INFERRED, Edge, Input
from dal.catalog.urls import mask_url

if TYPE_CHECKING:
    from dal.catalog import Catalog

KEY = "lineage"  # the version property that holds the record
GIT_TIMEOUT_S = 2.0
MAX_DOWNSTREAM = 1000  # versions listed as built from one version (the rest are counted as truncated)
__all__ = [
    "DECLARED",
    "INFERRED",
    "KEY",
    "Input",
    "Read",
    "clear_read_log",
    "collect",
    "downstream",
    "inputs",
    "lineage",
    "of",
    "read_log",
    "scope",
]


@dataclass(frozen=True)
class Read:
    """One dataset version this process opened through dal."""

    dataset: str
    version: int
    filters: str | None = None
    at: str = ""
    # what the reads made under this entry did (rows, bytes, files, time, cache: ``Scan.stats()``), summed;
    # None until a scan of it is read
    stats: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "filters": self.filters,
            "at": self.at,
            "stats": self.stats,
        }


_Key = tuple[str, int, str | None]


class _Window:
    """The reads a write would infer as its inputs: those since the previous write, in the order first read.

    ``take`` hands a write the current reads with a mark; ``consume(mark)`` (after the write succeeded) drops
    those not read again since, so a read made while the write ran stays for the next one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._reads: dict[_Key, tuple[str, int]] = {}  # key -> (first read at, sequence of the last read)

    def add(self, key: _Key, at: str) -> None:
        with self._lock:
            self._seq += 1
            first = self._reads.get(key)
            self._reads[key] = (first[0] if first else at, self._seq)

    def take(self) -> tuple[list[Input], int]:
        with self._lock:
            found = [Input(k[0], k[1], k[2], INFERRED, _parse(at)) for k, (at, _) in self._reads.items()]
            return found, self._seq

    def consume(self, mark: int) -> None:
        with self._lock:
            self._reads = {k: v for k, v in self._reads.items() if v[1] > mark}

    def clear(self) -> None:
        with self._lock:
            self._reads.clear()


def _parse(at: str) -> datetime | None:
    try:
        return datetime.fromisoformat(at)
    except ValueError:
        return None


_reads: list[Read] = []
_reads_lock = threading.Lock()
_process = _Window()  # the process's window (outside any scope)
_scope: contextvars.ContextVar[_Window | None] = contextvars.ContextVar("dal_lineage_scope", default=None)
_declared: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar("dal_lineage_inputs", default=None)


def _window() -> _Window:
    return _scope.get() or _process


def record_read(dataset: str, version: int, filters: str | None = None) -> None:
    """Remember that this process read ``version`` of ``dataset`` (``dal.open`` and filtered scans call this)."""
    entry = Read(dataset, int(version), filters, datetime.now(UTC).isoformat())
    with _reads_lock:
        _reads.append(entry)
    _window().add((entry.dataset, entry.version, filters), entry.at)


def record_use(dataset: str, version: int, filters: str | None = None) -> None:
    """Note that rows of ``version`` of ``dataset`` are being read (a scan's terminal): the next write's
    inferred inputs include it even when it was opened before the previous write."""
    _window().add((dataset, int(version), filters), datetime.now(UTC).isoformat())


def add_stats(dataset: str, version: int, filters: str | None, stats: Any) -> None:
    """Add a finished read's statistics (a ``ReadStats``) to the newest read-log entry of (dataset, version,
    filters): ``dal.open`` made the unfiltered one, a filtered scan its own. Nothing when the log has none."""
    import dataclasses

    values = stats.to_dict()
    with _reads_lock:
        for i in range(len(_reads) - 1, -1, -1):
            r = _reads[i]
            if (r.dataset, r.version, r.filters) == (dataset, int(version), filters):
                if r.stats is not None:
                    values = {
                        k: (r.stats.get(k, 0) + v if isinstance(v, int | float) and k != "version" else v)
                        for k, v in values.items()
                    }
                _reads[i] = dataclasses.replace(r, stats=values)
                return


def read_log() -> list[Read]:
    """Every (dataset, version, filters) this process read through dal, oldest first — to log with a model; each
    with ``stats``: what the reads under it did (rows, bytes, files, seconds, cache; see ``Scan.stats()``)."""
    with _reads_lock:
        return list(_reads)


def clear_read_log() -> None:
    """Forget the reads so far (a long-lived process starting an unrelated job): the read log, and the reads
    the next write would infer as its inputs."""
    with _reads_lock:
        _reads.clear()
    _process.clear()
    scoped = _scope.get()
    if scoped is not None:
        scoped.clear()


@contextmanager
def scope() -> Iterator[None]:
    """Reads made inside are the inferred inputs of writes made inside, and of nothing else::

        with dal.lineage.scope():
            feats = dal.open("features.y").to_arrow()
            dal.write(model_inputs(feats), "train.set")   # upstream: features.y only

    Reads before the block are not seen by writes inside it; reads inside it are not seen by writes after
    it. Applies to this thread or asyncio task (``contextvars``); scopes nest."""
    token = _scope.set(_Window())
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def inputs(*items: Any) -> Iterator[None]:
    """Declare the inputs of every ``dal.write`` inside the block (one without its own ``inputs=``)::

        with dal.lineage.inputs(dal.open("raw.a", 3), "raw.b"):
            pipeline.run()          # its dal.write calls record exactly raw.a@3 and raw.b's latest version

    ``items`` as ``dal.write(inputs=...)``: Datasets, Scans, VersionInfos, names (latest version) or
    ``(name, version)`` pairs; checked by each write before it writes anything."""
    token = _declared.set(tuple(items))
    try:
        yield
    finally:
        _declared.reset(token)


def declared() -> tuple[Any, ...] | None:
    """The inputs declared by an enclosing ``inputs(...)`` block (None outside one)."""
    return _declared.get()


def inferred() -> tuple[list[Input], _Window, int]:
    """The reads a write starting now infers as its inputs, and what ``done`` needs to end the window."""
    window = _window()
    found, mark = window.take()
    return found, window, mark


def done(window: _Window, mark: int) -> None:
    """A write succeeded: the reads it took are consumed (the next write starts a new window)."""
    window.consume(mark)


def _git(directory: str) -> dict[str, Any] | None:
    """The commit and dirty flag of the git repository holding ``directory``; None when there is none (or git
    is missing or slow): never fails."""
    try:
        head = subprocess.run(
            ["git", "-C", directory, "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
        )  # fmt: skip
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", directory, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
        )  # fmt: skip
        dirty = None if status.returncode != 0 else bool(status.stdout.strip())
        return {"commit": head.stdout.strip(), "dirty": dirty}
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _program_dir() -> str:
    main = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    if main and os.path.exists(main):
        return os.path.dirname(os.path.abspath(main)) or os.getcwd()
    return os.getcwd()


def _spark(data: Any) -> dict[str, Any] | None:
    try:
        sc = data.sparkSession.sparkContext
        return {"application_id": str(sc.applicationId), "master": mask_url(str(sc.master))}
    except Exception:  # never fail a write for its lineage
        return None


def collect(data: Any = None, *, spark: bool = False, upstream: Sequence[Input] = ()) -> dict[str, Any]:
    """The lineage record of a write happening now in this process (``data``: a Spark DataFrame when ``spark``;
    ``upstream``: its inputs, declared or inferred)."""
    from dal._version import __version__

    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = None
    record: dict[str, Any] = {
        "user": user,
        "host": socket.gethostname(),
        "time": datetime.now(UTC).isoformat(),
        "dal_version": __version__,
        "program": mask_url(sys.argv[0]) if sys.argv and sys.argv[0] else None,
        "git": _git(_program_dir()),
        "upstream": [u.to_dict() for u in unique(upstream)],
    }
    if spark:
        record["spark"] = _spark(data)
    return record


def unique(items: Sequence[Input]) -> list[Input]:
    """``items`` without repeats of a (dataset, version, filters), first kept."""
    seen: set[_Key] = set()
    out = []
    for i in items:
        if (i.dataset, i.version, i.filters) not in seen:
            seen.add((i.dataset, i.version, i.filters))
            out.append(i)
    return out


def of(version: VersionInfo) -> dict[str, Any]:
    """The lineage record of a version ({} when it was not written by dal.write, e.g. registered or synced)."""
    record = version.properties.get(KEY)
    return dict(record) if isinstance(record, Mapping) else {}


def downstream(cat: Catalog, name: str, number: int) -> list[VersionInfo]:
    """The versions (of any dataset) recorded as built from ``number`` of ``name`` (also those written while
    the dataset had an earlier name), by dataset name and number."""
    return [cat.version(e.dataset, e.version) for e in _downstream_edges(cat, name, number)[0]]


def _downstream_edges(cat: Catalog, name: str, number: int) -> tuple[list[Edge], bool]:
    """One edge per downstream version (declared wins if it has both kinds), and whether the list was cut."""
    edges = cat.downstream(name, number, limit=MAX_DOWNSTREAM + 1)
    by_version: dict[tuple[str, int], Edge] = {}
    for e in edges:
        key = (e.dataset, e.version)
        if key not in by_version or e.how == DECLARED:
            by_version[key] = e
    found = [by_version[k] for k in sorted(by_version)]
    return found[:MAX_DOWNSTREAM], len(edges) > MAX_DOWNSTREAM


def lineage(cat: Catalog, name: str, version: VersionRef | VersionInfo = None, *, depth: int = 1) -> dict[str, Any]:
    """Upstream and downstream of one version of ``name`` (latest by default; a ``VersionInfo`` of it is used as
    is), ``depth`` levels down. Each edge says ``how`` it is known (``declared`` / ``inferred``); upstream
    datasets renamed since are shown by their current name (``recorded_as``: the name in the record)."""
    v = version if isinstance(version, VersionInfo) else cat.version(name, version)
    record = of(v)
    result: dict[str, Any] = {"dataset": name, "version": v.number, **{k: x for k, x in record.items()}}
    # the record's list, in its order, each entry resolved through its edge (current name, how); a record stored
    # by other means than dal.write (no edges) is shown as written; edges the record lacks come last
    edges = {(e.recorded_as or e.upstream, e.upstream_version, e.filters): e for e in cat.upstream(name, v.number)}
    recorded = record.get("upstream")
    upstream: list[dict[str, Any]] = []
    seen: set[tuple[Any, Any, Any]] = set()
    for u in recorded if isinstance(recorded, list) else []:
        if not isinstance(u, Mapping):
            continue
        key = (u.get("dataset"), u.get("version"), u.get("filters"))
        if key in seen:
            continue
        seen.add(key)
        e = edges.pop(key, None)  # type: ignore[arg-type]
        if e is not None:
            upstream.append(_edge_entry(e))
        else:
            upstream.append({**u, "how": u.get("how") if u.get("how") in (DECLARED, INFERRED) else INFERRED})
    upstream += [_edge_entry(e) for e in edges.values()]
    result["upstream"] = _one_per_version(upstream)
    result["downstream"] = _downstream_tree(cat, name, v.number, max(1, depth), set())
    return result


def _one_per_version(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each upstream version once, where it was read several times through different filters: its filters joined
    with OR (null when one read took it whole), ``declared`` when any of its entries is."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    filters: dict[tuple[str, str], list[str | None]] = {}
    for u in entries:
        key = (str(u.get("dataset")), str(u.get("version")))
        if key not in merged:
            merged[key] = dict(u)
        elif u.get("how") == DECLARED:
            merged[key]["how"] = DECLARED
        filters.setdefault(key, []).append(u.get("filters") or None)
    for key, entry in merged.items():
        read = filters[key]
        if len(read) > 1:
            entry["filters"] = None if None in read else " OR ".join(f"({f})" for f in dict.fromkeys(read))
    return list(merged.values())


def _edge_entry(e: Edge) -> dict[str, Any]:
    entry: dict[str, Any] = {"dataset": e.upstream, "version": e.upstream_version, "filters": e.filters, "how": e.how}
    if e.recorded_as is not None:
        entry["recorded_as"] = e.recorded_as
    return entry


def _downstream_tree(cat: Catalog, name: str, number: int, depth: int, seen: set[tuple[str, int]]) -> list[Any]:
    out: list[Any] = []
    edges, cut = _downstream_edges(cat, name, number)
    for d in edges:
        key = (d.dataset, d.version)
        if key in seen:
            continue
        seen.add(key)
        node: dict[str, Any] = {"dataset": d.dataset, "version": d.version, "how": d.how}
        if depth > 1:
            node["downstream"] = _downstream_tree(cat, d.dataset, d.version, depth - 1, seen)
        out.append(node)
    if cut:
        out.append({"truncated": True, "shown": MAX_DOWNSTREAM})
    return out
