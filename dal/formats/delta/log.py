"""Reading a Delta table's log: delta-rs tables, commit files and their actions, the checks made on them
(paths under the root, row counts against footers), commit metadata and deletion vectors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from dal.errors import DalError, FormatError, UnsupportedFeature, require
from dal.formats.base import (
    WRITE_ID_KEY,
    WriteOptions,
)
from dal.formats.footers import checked_rows, most_rows
from dal.storage import ownership, uris

# Delta reader features dal reads correctly; any other one a version needs makes ``open`` refuse it
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",  # physical -> logical names from the schema's field metadata (dal.formats.fragments)
        "deletionVectors",  # per-file masks from delta-rs, applied per row group (dal.formats.fragments)
        "timestampNtz",
        "v2Checkpoint",  # log replay is delta-rs's
        "vacuumProtocolCheck",  # constrains VACUUM only, not reads
        "variantType",
        "variantType-preview",
    }
)


def _dl() -> Any:
    return require("deltalake", "delta")


def _opts(storage_options: Mapping[str, str]) -> dict[str, str] | None:
    return uris.object_store_options(storage_options)


def _check_location(location: str) -> str:
    """Refuse locations delta-rs cannot keep a table at between two calls."""
    if location.startswith("memory://"):
        raise DalError(
            "Delta tables cannot live on memory:// (delta-rs keeps a separate in-memory store per table object, "
            "so a written version would vanish); use format='petastorm' there, or a local path or object store"
        )
    return location


def _arrow_schema(table: Any) -> pa.Schema:
    return pa.schema(table.schema().to_arrow())


def add_actions(table: Any) -> pa.Table:
    """delta-rs's add actions of ``table``'s loaded version (``get_add_actions(flatten=True)``) as a pyarrow table,
    through the C stream interface: ``pa.table`` would first ask whether delta-rs's (arro3) table is a pandas
    DataFrame, importing pandas (~0.25 s CPU of a fresh process's first plan or register)."""
    return pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()


def open_table(location: str, storage_options: Mapping[str, str], version: int | None = None) -> Any:
    _check_location(location)
    try:
        return _dl().DeltaTable(location, version=version, storage_options=_opts(storage_options))
    except Exception as e:  # delta-rs raises its own TableNotFoundError / DeltaError / OSError
        at = " (its latest version)" if version is None else f" at version {version}"
        unknown = sorted(_logged_reader_features(location, storage_options) - SUPPORTED_READER_FEATURES)
        if unknown:
            raise UnsupportedFeature(
                f"cannot open Delta table {location}{at}: its protocol requires the reader feature(s) "
                f"{', '.join(unknown)}, which neither delta-rs nor dal can read ({_short(e)})"
            ) from e
        raise FormatError(f"cannot open Delta table {location}{at}: {_short(e)}") from e


def table_exists(location: str, storage_options: Mapping[str, str]) -> bool:
    return bool(_dl().DeltaTable.is_deltatable(_check_location(location), storage_options=_opts(storage_options)))


def find_commit(location: str, opts: WriteOptions) -> int:
    """The version our commit got (others may have committed after it), matched by its write id.

    Reads the commit files themselves: delta-rs's ``history()`` can label entries with the wrong
    version number while other writers commit concurrently (seen with two appending processes).
    """
    write_id = opts.commit_metadata.get(WRITE_ID_KEY)
    latest = open_table(location, opts.storage_options).version()
    for v in range(latest, max(-1, latest - 500), -1):
        info = _metadata(commit_info(location, v, opts.storage_options) or {})
        if write_id is None or info.get(WRITE_ID_KEY) == write_id:
            return v
    raise FormatError(f"committed to {location} but cannot find commit {write_id} in the last 500 versions")


def _short(e: BaseException) -> str:
    """One line: the error's type and message, without the backtrace delta-rs appends (``0: <unknown>``)."""
    text = re.split(r"\n\s*\d+: ", str(e), maxsplit=1)[0]
    return f"{type(e).__name__}: {' '.join(text.split())[:300]}"


def _commit_exists(location: str, version: int, storage_options: Mapping[str, str]) -> bool:
    fs, root = uris.filesystem(location, storage_options)
    try:
        info = fs.get_file_info(uris.join(root, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return False
    return bool(info.type == pafs.FileType.File)


def _logged_reader_features(location: str, storage_options: Mapping[str, str]) -> set[str]:
    """Reader features named by the protocol actions of the table's commit files (best effort: for saying
    why delta-rs refuses a table it cannot load)."""
    fs, root = uris.filesystem(location, storage_options)
    features: set[str] = set()
    try:
        infos = fs.get_file_info(pafs.FileSelector(uris.join(root, "_delta_log")))
        for info in sorted(i.path for i in infos if i.path.endswith(".json"))[-50:]:
            with fs.open_input_stream(info) as fh:
                for line in fh.read().decode(errors="replace").splitlines():
                    if '"protocol"' in line:
                        protocol = json.loads(line).get("protocol") or {}
                        features = set(protocol.get("readerFeatures") or [])
    except (OSError, ValueError, AttributeError):
        return set()
    return features


def _deleted_rows(table: Any) -> dict[str, tuple[int, ...]]:
    """Deleted row positions per data file (its path relative to the table, unquoted), from delta-rs."""
    root = unquote(str(table.table_uri)).rstrip("/") + "/"
    dvs = pa.table(table.deletion_vectors())
    out: dict[str, tuple[int, ...]] = {}
    if not dvs.num_rows:
        return out
    masks = dvs.column("selection_vector").combine_chunks()
    offsets = masks.offsets.to_numpy()
    keep = masks.values.to_numpy(zero_copy_only=False).astype(bool)  # True: the row stays
    for i, uri in enumerate(dvs.column("filepath").to_pylist()):
        path = unquote(str(uri))
        gone = np.flatnonzero(~keep[offsets[i] : offsets[i + 1]])
        out[path[len(root) :] if path.startswith(root) else path] = tuple(gone.tolist())
    return out


def _commit_actions(location: str, version: int, storage_options: Mapping[str, str]) -> list[dict[str, Any]]:
    """The actions of one commit file ([] when it is gone: a version rebuilt from a checkpoint)."""
    fs, root = uris.filesystem(location, storage_options)
    try:
        with fs.open_input_stream(uris.join(root, "_delta_log", f"{version:020d}.json")) as fh:
            text = fh.read().decode()
    except (FileNotFoundError, OSError):
        return []
    out = []
    for line in text.splitlines():
        if line.strip():
            try:
                action = json.loads(line)
            except ValueError as e:
                raise FormatError(f"{location}: Delta commit {version} is not valid JSON ({e})") from e
            if isinstance(action, dict):
                out.append(action)
    return out


def _check_paths(location: str, version: int, actions: Iterable[Mapping[str, Any]]) -> None:
    """Refuse a commit naming a file outside the table's root: the paths of add, remove and cdc actions and of
    deletion vectors (``dal.storage.ownership``: relative paths decoded and joined, absolute ones inside).

    Raises:
        FormatError: naming the table, the version and the entry."""
    table = f"{uris.mask_url(location)} (Delta version {version})"
    for action in actions:
        for kind in ("add", "remove", "cdc"):
            a = action.get(kind)
            if not isinstance(a, dict):
                continue
            article = "an" if kind == "add" else "a"
            if "path" in a:
                ownership.below(location, str(a["path"]), table=table, entry=f"{article} {kind} action's path")
            dv = a.get("deletionVector")
            path = deletion_vector_path(dv) if isinstance(dv, dict) else None
            if path is not None:
                ownership.below(location, path, table=table, entry=f"{article} {kind} action's deletion vector")


def _check_claim(where: str, add: Mapping[str, Any]) -> None:
    """Refuse an add action whose ``numRecords`` no file of its size could hold, without reading the file: the
    check for the counts :func:`_check_counts` does not compare with footers (dal's own commits, files known
    only from a checkpoint), so a hand-edited log claiming 10**12 rows for a small file is not recorded.

    Raises:
        FormatError: naming the table, the version, the file and the claim."""
    claimed, size = add.get("num_records"), add.get("size_bytes")
    if claimed is None or not isinstance(size, int):
        return
    if claimed < 0 or claimed > most_rows(size):
        raise FormatError(
            f"{where}: the log says {add['path']} holds {claimed:,} rows (numRecords) but a Parquet file of "
            f"{size:,} bytes holds at most {most_rows(size):,}; dal will not record a row count its reads would "
            "not return"
        )


def _check_counts(
    location: str, version: int, actions: Iterable[Mapping[str, Any]], storage_options: Mapping[str, str]
) -> None:
    """Refuse a commit another writer made whose ``numRecords`` statistics disagree with the Parquet footers
    of the files it adds (``count()`` and the catalog's row counts come from these statistics, a read from
    the files: a log claiming 10**12 rows for a 10-row file made them differ). One footer per file added,
    read once over a table's history; dal's own commits carry the counts it wrote and are not re-read.

    Raises:
        FormatError: naming the table, the version, the file and both counts."""
    import pyarrow.parquet as pq

    fs = root = None
    for action in actions:
        a = action.get("add")
        if not isinstance(a, dict) or not isinstance(a.get("stats"), str):
            continue
        try:
            claimed = json.loads(a["stats"]).get("numRecords")
        except (ValueError, AttributeError):
            continue
        if claimed is None:
            continue
        if fs is None:
            fs, root = uris.filesystem(location, storage_options)
        rel = ownership.below(location, str(a["path"]), table=location, entry="an add action's path")
        try:
            with fs.open_input_file(uris.join(str(root), rel)) as fh:
                actual = checked_rows(
                    pq.ParquetFile(fh).metadata, f"{uris.mask_url(location)} (Delta version {version}): {rel}"
                )
        except FileNotFoundError:
            continue  # gone (gc, VACUUM): the version is recorded as unavailable elsewhere
        if not isinstance(claimed, int) or isinstance(claimed, bool) or claimed != actual:
            raise FormatError(
                f"{uris.mask_url(location)} (Delta version {version}): the log says {rel} holds "
                f"{str(claimed)[:40]} rows (numRecords) but its Parquet footer says {actual:,}; dal will not "
                "record a row count its reads would not return"
            )


def commit_info(location: str, version: int, storage_options: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``commitInfo`` action of one commit file (None when the file is gone or has none)."""
    fs, root = uris.filesystem(location, storage_options)
    try:
        with fs.open_input_stream(uris.join(root, "_delta_log", f"{version:020d}.json")) as fh:
            data: bytes = fh.read()
    except (FileNotFoundError, OSError):
        return None
    # the first line naming it, found in the bytes (a commit of 50,000 adds is ~30 MB: no split into lines)
    at = data.find(b'"commitInfo"')
    if at < 0:
        return None
    end = data.find(b"\n", at)
    line = data[data.rfind(b"\n", 0, at) + 1 : end if end >= 0 else len(data)]
    info = json.loads(line.decode()).get("commitInfo")
    return info if isinstance(info, dict) else None


def _metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    """A commit's dal keys: delta-rs writes them into ``commitInfo`` itself, delta-spark as the JSON of its
    ``userMetadata`` (an older dal wrote the bare write id there)."""
    out = dict(info)
    user = info.get("userMetadata")
    if isinstance(user, str) and user:
        try:
            parsed = json.loads(user)
        except ValueError:
            parsed = {WRITE_ID_KEY: user}
        if isinstance(parsed, dict):
            out = {**parsed, **out}
        else:
            out.setdefault(WRITE_ID_KEY, user)
    return out


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(text: str) -> bytes:
    out = bytearray()
    for i in range(0, len(text), 5):
        n = 0
        for ch in text[i : i + 5]:
            n = n * 85 + _Z85.index(ch)
        out += n.to_bytes(4, "big")
    return bytes(out)


def deletion_vector_path(descriptor: Mapping[str, Any]) -> str | None:
    """The file of a deletion vector descriptor (``add.deletionVector``): relative to the table for storage
    type ``u`` (``[prefix/]deletion_vector_<uuid>.bin``), the absolute URI (percent-encoded) for ``p``, None
    when inline. ``dal.storage.ownership`` resolves either under the table's root."""
    kind, where = descriptor.get("storageType"), str(descriptor.get("pathOrInlineDv") or "")
    if kind == "p":
        return where  # a URI, percent-encoded
    if kind != "u" or len(where) < 20:
        return None
    raw = _z85(where[-20:])
    hexed = raw.hex()
    name = f"deletion_vector_{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}.bin"
    return f"{where[:-20]}/{name}" if len(where) > 20 else name


def _actions(fs: pafs.FileSystem, path: str) -> Iterator[dict[str, Any]]:
    with fs.open_input_stream(path) as fh:
        for line in fh.read().decode().splitlines():
            if line.strip():
                yield json.loads(line)
