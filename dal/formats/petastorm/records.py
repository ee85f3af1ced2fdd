"""The version records of a Petastorm dataset dal writes (``_dal_versions/<n>.json``): what they hold, reading
them, and telling an abandoned commit from a damaged one (see ``dal.formats.petastorm.format``)."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dal.errors import FormatError, one_line
from dal.formats.directory import (
    FileEntry,
)
from dal.formats.petastorm.unischema import UNISCHEMA_KEY, loads_unischema
from dal.storage import ownership
from dal.storage.location import Location
from dal.tensors.schema import TensorSchema

COMMON_METADATA = "_common_metadata"
RECORDS = "_dal_versions"
VERSION_DIR = re.compile(r"v\d+-[0-9a-f]+")  # a version's directory, v<n>-<token>
ABANDONED_AFTER_S = 60.0
FILE_ENTRY_SCHEMA = pa.schema(
    [("path", pa.string()), ("size", pa.int64()), ("rows", pa.int64()), ("row_groups", pa.int64())]
)


@dataclass(frozen=True)
class Commit:
    """The record that makes ``directory`` version ``version``."""

    version: int
    directory: str
    mode: str
    committed_at: datetime
    files: tuple[FileEntry, ...]
    dataset: str = ""  # the catalog name it was written for ("" when unknown)
    # the write's commit metadata (``WriteOptions.commit_metadata``: its id, what the table says about itself);
    # {} in a record of an older dal
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> bytes:
        body: dict[str, Any] = {
            "version": self.version,
            "directory": self.directory,
            "mode": self.mode,
            "committed_at": self.committed_at.isoformat(),
            "files": [dataclasses.asdict(f) for f in self.files],
        }
        if self.dataset:
            body["dataset"] = self.dataset
        if self.metadata:
            body["metadata"] = dict(self.metadata)
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Commit:
        try:
            body = json.loads(data)
            return cls(
                int(body["version"]),
                str(body["directory"]),
                str(body["mode"]),
                datetime.fromisoformat(body["committed_at"]),
                tuple(
                    FileEntry(str(f["path"]), int(f["size"]), int(f["rows"]), int(f["row_groups"]))
                    for f in body["files"]
                ),
                str(body.get("dataset", "")),
                _metadata(body.get("metadata")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise FormatError(f"malformed dal version record: {e}") from e


def _metadata(value: Any) -> dict[str, str]:
    """A record's ``metadata``: its string keys and values (anything else in it is not dal's, and ignored)."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def record_name(n: int) -> str:
    return f"{RECORDS}/{n:020d}.json"


def committed_numbers(loc: Location) -> list[int]:
    """The committed version numbers under ``loc`` (one LIST)."""
    out = []
    for rel, _size in loc.list(RECORDS, recursive=False):
        stem = rel.removesuffix(".json")
        if rel.endswith(".json") and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def read_commit(loc: Location, n: int) -> Commit:
    """Version ``n``'s record.

    Raises:
        FormatError: it is missing or damaged (naming the file and what to do).
    """
    commit = load_commit(loc, n)
    if commit is None:
        raise FormatError(
            f"Petastorm version {n} of {loc.uri} was never completed: its record {loc.child(record_name(n))} "
            "is an abandoned commit (damaged, and no data of it is left)"
        )
    return commit


def load_commit(loc: Location, n: int) -> Commit | None:
    """Version ``n``'s record, or None when it is an abandoned commit (see the module's notes).

    Raises:
        FormatError: missing, or damaged in a way that skipping it could lose data (naming the file and the way out),
            or naming a directory or file outside the dataset's root.
    """
    rel = record_name(n)
    try:
        data = loc.read(rel)
    except FileNotFoundError:
        raise FormatError(f"Petastorm version {n} of {loc.uri} is missing ({loc.child(rel)})") from None
    try:
        commit = Commit.from_json(data)
    except FormatError as e:
        problem = str(e).removeprefix("malformed dal version record: ") or "no content"
    else:
        return _confined(loc, rel, commit)  # FormatError for a directory or file outside the root
    where = loc.child(rel)
    what = "empty" if not data.strip() else f"damaged ({problem})"
    stamp = loc.fs.get_file_info(loc.path(rel)).mtime
    age = time.time() - stamp.timestamp() if stamp is not None else ABANDONED_AFTER_S
    if age < ABANDONED_AFTER_S:
        raise FormatError(
            f"the version record {where} is {what} and was written {age:.0f} s ago: an older dal may still be "
            f"writing it. If no writer is running, dal treats it as an abandoned commit {ABANDONED_AFTER_S:.0f} s "
            "after it was written: try again then"
        )
    if not data.strip():
        return None  # never described anything: nobody can have read or recorded it
    kept = _directories_with_data(loc, n)
    if not kept:
        return None  # its files are gone: nothing to lose
    raise FormatError(
        f"the version record {where} is {what} but its data is still in {', '.join(loc.child(d) for d in kept)}, "
        f"so dal will not guess which files version {n} holds. Restore the record from a backup; or, to give "
        f"version {n} up, delete that directory: dal then skips the record as an abandoned commit"
    )


def _confined(loc: Location, rel: str, commit: Commit) -> Commit:
    """``commit`` when its directory and every file it lists lie under the dataset's root.

    Raises:
        FormatError: naming the dataset and the record (``dal.storage.ownership``: dal reads nothing outside)."""
    table = f"{loc.uri}: the version record {rel}"
    ownership.below(loc.uri, commit.directory, table=table, entry='its "directory"', encoded=False)
    for f in commit.files:
        ownership.below(loc.uri, f"{commit.directory}/{f.path}", table=table, entry="a file it lists", encoded=False)
    return commit


def _directories_with_data(loc: Location, n: int) -> list[str]:
    """The ``v<n>-*`` directories under ``loc`` that hold a ``_common_metadata``."""
    selector = pafs.FileSelector(loc.path(), recursive=False, allow_not_found=True)
    names = [i.base_name for i in loc.fs.get_file_info(selector) if i.type == pafs.FileType.Directory]
    return sorted(d for d in names if d.startswith(f"v{n}-") and loc.exists(f"{d}/{COMMON_METADATA}"))


def latest_commit(loc: Location, numbers: Sequence[int]) -> Commit | None:
    """The newest record among ``numbers`` that is not an abandoned commit (None: no version yet)."""
    for n in reversed(numbers):
        commit = load_commit(loc, n)
        if commit is not None:
            return commit
    return None


def read_schema(loc: Location, directory: str = "") -> TensorSchema:
    """The Unischema of a Petastorm dataset directory (restricted unpickling).

    Raises:
        FormatError: no ``_common_metadata`` or no Unischema in it (not a Petastorm dataset).
    """
    rel = f"{directory}/{COMMON_METADATA}" if directory else COMMON_METADATA
    where = loc.child(directory)
    if not loc.exists(rel):
        raise FormatError(f"{where} is not a Petastorm dataset: it has no {COMMON_METADATA}")
    try:
        stored = pq.read_schema(loc.path(rel), filesystem=loc.fs)
    except (pa.ArrowException, OSError) as e:  # truncated or not Parquet at all
        raise FormatError(f"{loc.child(rel)} is damaged ({one_line(e)}); restore it from a backup") from e
    meta = stored.metadata or {}
    if UNISCHEMA_KEY not in meta:
        raise FormatError(
            f"{where} has no Petastorm schema ({UNISCHEMA_KEY.decode()}) in {COMMON_METADATA}; "
            "register it with format='parquet' if it is plain Parquet"
        )
    return loads_unischema(meta[UNISCHEMA_KEY], stored)


def version_schema(loc: Location, record: Commit) -> TensorSchema:
    """The Unischema of a published version (its directory's ``_common_metadata``).

    Raises:
        FormatError: damaged, or gone (``broken_version``: the version was published without its files).
    """
    try:
        return read_schema(loc, record.directory)
    except FormatError:
        if loc.exists(f"{record.directory}/{COMMON_METADATA}"):
            raise
        raise broken_version(loc, record.version, f"{record.directory}/{COMMON_METADATA}") from None


def broken_version(loc: Location, n: int, rel: str) -> FormatError:
    """The error for a published version whose files are gone (an older dal published a write whose files a
    gc deleted meanwhile), with the way out: give the version up as an abandoned commit."""
    return FormatError(
        f"Petastorm version {n} of {loc.uri} is published but its files are gone ({loc.child(rel)} is missing: "
        "deleted while the write ran, by a gc of an older dal, or by hand). To give the version up and go on, "
        f"empty its record ({loc.child(record_name(n))}, e.g. `truncate -s 0` it, or upload an empty object in "
        f"its place); {ABANDONED_AFTER_S:.0f} s after that dal skips it as an abandoned commit and never reuses "
        "its number"
    )
