"""Lineage: what produced each version, recorded automatically by ``dal.write``.

Every ``dal.open`` in this process is remembered (``read_log()``); a write records, under the ``lineage`` key of
the new version's properties, who wrote it (user, host, time, dal version), from where (the git commit of the
calling program's repository, and whether it was dirty; the Spark application id and master for Spark writes)
and the dataset versions this process read before it (``upstream``). ``downstream`` finds the versions whose
upstream names a version: the database prefilters on the dataset's name in the properties, the exact check is
here. Records keep the name a dataset had when it was read; ``rename`` records the former names (with the time
each was given up) in the dataset's ``former_names`` property, so both directions follow renames. Credentials are
never recorded: storage options are not kept, and URLs are masked.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from catalog import Catalog, DatasetInfo, VersionInfo, VersionRef
from catalog.types import as_utc
from catalog.urls import mask_url

KEY = "lineage"  # the version property that holds the record
GIT_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Read:
    """One dataset version this process opened through dal."""

    dataset: str
    version: int
    filters: str | None = None
    at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "version": self.version, "filters": self.filters, "at": self.at}


_reads: list[Read] = []
_reads_lock = threading.Lock()


def record_read(dataset: str, version: int, filters: str | None = None) -> None:
    """Remember that this process read ``version`` of ``dataset`` (``dal.open`` calls this)."""
    entry = Read(dataset, int(version), filters, datetime.now(UTC).isoformat())
    with _reads_lock:
        _reads.append(entry)


def read_log() -> list[Read]:
    """Every (dataset, version, filters) this process read through dal, oldest first — to log with a model."""
    with _reads_lock:
        return list(_reads)


def clear_read_log() -> None:
    """Forget the reads so far (a long-lived process starting an unrelated job)."""
    with _reads_lock:
        _reads.clear()


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


def collect(data: Any = None, *, spark: bool = False) -> dict[str, Any]:
    """The lineage record of a write happening now in this process (``data``: a Spark DataFrame when ``spark``)."""
    from dal._version import __version__

    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = None
    seen: set[tuple[str, int, str | None]] = set()
    upstream = []
    for r in read_log():
        if (r.dataset, r.version, r.filters) not in seen:
            seen.add((r.dataset, r.version, r.filters))
            upstream.append({"dataset": r.dataset, "version": r.version, "filters": r.filters})
    record: dict[str, Any] = {
        "user": user,
        "host": socket.gethostname(),
        "time": datetime.now(UTC).isoformat(),
        "dal_version": __version__,
        "program": mask_url(sys.argv[0]) if sys.argv and sys.argv[0] else None,
        "git": _git(_program_dir()),
        "upstream": upstream,
    }
    if spark:
        record["spark"] = _spark(data)
    return record


def of(version: VersionInfo) -> dict[str, Any]:
    """The lineage record of a version ({} when it was not written by dal.write, e.g. registered or synced)."""
    record = version.properties.get(KEY)
    return dict(record) if isinstance(record, Mapping) else {}


_Span = tuple[str, datetime | None, datetime | None]


def _spans(info: DatasetInfo) -> list[_Span]:
    """The names a dataset had, each with the time range it held it (``rename`` records ``former_names``):
    (name, from, until), None for open ends; the current name is unbounded below when it was never renamed."""
    spans: list[_Span] = []
    start: datetime | None = None
    former = info.properties.get("former_names")
    for f in former if isinstance(former, list) else []:
        try:
            name, until = f["name"], as_utc(datetime.fromisoformat(f["until"]))
        except (TypeError, KeyError, ValueError):
            continue  # not written by rename (a hand-edited property): ignore
        spans.append((str(name), start, until))
        start = until
    spans.append((info.name, start, None))
    return spans


def _covers(span: _Span, when: datetime) -> bool:
    _, start, until = span
    return (start is None or when >= start) and (until is None or when < until)


def _former_owner(renamed: list[DatasetInfo], name: str, when: datetime) -> str | None:
    """The current name of the dataset that was called ``name`` at ``when`` and has been renamed since, if any
    (``renamed``: the datasets with ``former_names``). Recorded renames win over a dataset's current name, which
    is open-ended into the past: a new dataset may take a name another one gave up."""
    return next((d.name for d in renamed if any(s[0] == name and _covers(s, when) for s in _spans(d)[:-1])), None)


def _renamed(cat: Catalog) -> list[DatasetInfo]:
    return [d for d in cat.list_datasets() if d.properties.get("former_names")]


def downstream(cat: Catalog, name: str, number: int, *, renamed: list[DatasetInfo] | None = None) -> list[VersionInfo]:
    """The versions (of any dataset) whose recorded upstream includes ``number`` of ``name``, also those written
    while the dataset had an earlier name (before a ``rename``). ``renamed``: the renamed datasets if known."""
    import json

    info = cat.get_dataset(name)
    spans = _spans(info)
    found: dict[tuple[str, int], VersionInfo] = {}
    for span_name in dict.fromkeys(s[0] for s in spans):
        for v in cat.versions_mentioning(json.dumps(span_name)):
            when = as_utc(v.created_at)
            for u in of(v).get("upstream") or []:
                if not (isinstance(u, Mapping) and u.get("version") == number and isinstance(u.get("dataset"), str)):
                    continue
                if not any(s[0] == u["dataset"] and _covers(s, when) for s in spans):
                    continue
                renamed = _renamed(cat) if renamed is None else renamed
                if _former_owner(renamed, u["dataset"], when) in (None, info.name):
                    found[(v.dataset, v.number)] = v
                    break
    return [found[k] for k in sorted(found)]


def _resolve(renamed: list[DatasetInfo], upstream: list[Any], when: datetime) -> list[Any]:
    """Upstream entries naming a dataset by a name it has since been renamed from get its current name in
    ``dataset`` and the recorded one in ``recorded_as``; others (a dropped dataset, too) are left as recorded."""
    out: list[Any] = []
    for u in upstream:
        recorded = u.get("dataset") if isinstance(u, Mapping) else None
        if not isinstance(recorded, str):
            out.append(u)
            continue
        current = _former_owner(renamed, recorded, when)
        out.append(u if current is None or current == recorded else {**u, "dataset": current, "recorded_as": recorded})
    return out


def lineage(cat: Catalog, name: str, version: VersionRef = None, *, depth: int = 1) -> dict[str, Any]:
    """Upstream and downstream of one version of ``name`` (latest by default), ``depth`` levels down. Upstream
    datasets renamed since are shown by their current name (``recorded_as``: the name in the record)."""
    v = cat.version(name, version)
    record = of(v)
    result: dict[str, Any] = {"dataset": name, "version": v.number, **{k: x for k, x in record.items()}}
    renamed = _renamed(cat)  # one query for the whole tree
    result["upstream"] = _resolve(renamed, list(result.get("upstream") or []), as_utc(v.created_at))
    result["downstream"] = _downstream_tree(cat, name, v.number, max(1, depth), set(), renamed)
    return result


def _downstream_tree(
    cat: Catalog, name: str, number: int, depth: int, seen: set[tuple[str, int]], renamed: list[DatasetInfo]
) -> list[Any]:
    out: list[Any] = []
    for d in downstream(cat, name, number, renamed=renamed):
        key = (d.dataset, d.number)
        if key in seen:
            continue
        seen.add(key)
        node: dict[str, Any] = {"dataset": d.dataset, "version": d.number}
        if depth > 1:
            node["downstream"] = _downstream_tree(cat, d.dataset, d.number, depth - 1, seen, renamed)
        out.append(node)
    return out
