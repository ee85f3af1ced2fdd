"""Shared parts of the gc-against-writes race tests: a dataset with a history gc can expire, the writer (a
real process, or a thread for Spark) paused at a named point while gc runs, and the checks every race ends
with — no row lost or doubled, no version the catalog shows with a file missing (read back by dal and by an
independent reader: delta-rs, or pyarrow over the Petastorm version's directory), and the dataset still
writable and collectable."""

from __future__ import annotations

import json
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.ops import lifecycle
from dal.storage import uris
from dal.storage.location import Location

SCHEMA = TensorSchema(
    "Frames", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("depth", np.float32, (2, 2), NdarrayCodec())]
)
NOW = timedelta(0)  # safe_age 0: every unreferenced file is old enough (the worst case for any safe_age)
NEW = list(range(1000, 1006))  # the racing write's rows


def data(fmt: str, ids: list[int]) -> Any:
    if fmt == "delta":
        return pa.table({"id": pa.array(ids, pa.int64())})
    return [{"id": i, "depth": np.full((2, 2), i, np.float32)} for i in ids]


def history(name: str, fmt: str, options: dict[str, str] | None = None) -> list[int]:
    """Three versions (create, overwrite, append): gc keeping the last one expires two, one of whose files
    are garbage. Returns the ids of the latest version."""
    extra: dict[str, Any] = {"schema": SCHEMA} if fmt == "petastorm" else {}
    dal.write(data(fmt, [0, 1, 2]), name, format=fmt, storage_options=options, **extra)
    dal.write(data(fmt, [10, 11, 12]), name, format=fmt, mode="overwrite", storage_options=options)
    dal.write(data(fmt, [20, 21]), name, format=fmt, storage_options=options)
    return [10, 11, 12, 20, 21]


def writer_code(name: str, fmt: str, ids: list[int], options: dict[str, str] | None = None) -> str:
    """A Python program appending ``ids`` to ``name`` with dal.write (pandas for Delta, rows for Petastorm)."""
    rows = (
        f"pd.DataFrame({{'id': {ids!r}}})"
        if fmt == "delta"
        else f"[{{'id': i, 'depth': np.full((2, 2), i, np.float32)}} for i in {ids!r}]"
    )
    return (
        "import json, numpy as np, pandas as pd, dal\n"
        f"v = dal.write({rows}, {name!r}, format={fmt!r}, storage_options=json.loads({json.dumps(options or {})!r}))\n"
        "print(v.number)\n"
    )


def ids_of(name: str, version: int | None = None, options: dict[str, str] | None = None) -> list[int]:
    ds = dal.open(name, version, storage_options=options)
    column = ds.to_numpy(["id"])["id"] if ds.info.format == "petastorm" else ds.to_arrow()["id"].to_numpy()
    return sorted(int(i) for i in column)


def independent_ids(cat: Catalog, name: str, number: int, options: dict[str, str] | None = None) -> list[int]:
    """The version's ids read without dal's reader: delta-rs, or pyarrow over the Petastorm version's directory."""
    info, v = cat.get_dataset(name), cat.version(name, number)
    if info.format == "delta":
        so = uris.object_store_options(options or {})  # dal's storage options as delta-rs takes them
        table = deltalake.DeltaTable(info.location, version=v.storage_version, storage_options=so)
        return sorted(table.to_pyarrow_table(columns=["id"])["id"].to_pylist())
    loc = Location.of(info.location, options)
    return sorted(pq.read_table(loc.path(v.properties["path"]), filesystem=loc.fs, columns=["id"])["id"].to_pylist())


def missing_files(name: str, number: int, options: dict[str, str] | None = None) -> list[str]:
    """The files version ``number`` pins that are not there."""
    out = []
    for f in dal.open(name, number, storage_options=options).files():
        loc = Location.of(f.uri.rsplit("/", 1)[0], options)
        if not loc.exists(f.uri.rsplit("/", 1)[1]):
            out.append(f.uri)
    return out


def check(cat: Catalog, name: str, expected: list[int], options: dict[str, str] | None = None) -> int:
    """Every readable version complete (dal and the independent reader agree, no file missing), the latest
    holding exactly ``expected``; then the dataset takes another write and another gc. Returns rows lost."""
    got = ids_of(name, options=options)
    lost = len(set(expected) - set(got))
    assert got == sorted(expected), (got, expected)
    for v in cat.versions(name):
        if v.unavailable is not None:
            continue
        assert missing_files(name, v.number, options) == [], v.number
        assert len(ids_of(name, v.number, options)) == v.row_count
        assert independent_ids(cat, name, v.number, options) == ids_of(name, v.number, options)
    fmt = cat.get_dataset(name).format
    dal.write(data(fmt, [5000]), name, format=fmt, storage_options=options)  # still writable
    lifecycle.gc(name, keep_last=1, safe_age=NOW, storage_options=options)
    assert ids_of(name, options=options) == sorted([*expected, 5000])
    assert missing_files(name, cat.get_dataset(name).latest_version or 0, options) == []
    return lost


def files_below(root: str | Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in Path(root).rglob("*") if p.is_file()}


STREAM_WRITER = textwrap.dedent(
    """
    import functools
    import deltalake, pyarrow as pa, dal
    from dal._testhooks import pause

    # a table whose writer rolls small files: delta-rs writes (and names) files while the data still streams
    deltalake.write_deltalake = functools.partial(deltalake.write_deltalake, target_file_size=65536)
    schema = pa.schema([("id", pa.int64())])

    def batches():
        for i in range(6):
            yield pa.record_batch([pa.array(range(STREAM_START + 20000 * i, STREAM_START + 20000 * (i + 1)))], schema=schema)
            if i == 3:
                pause("stream-paused")  # a long write: its first files are on disk, the rest still to come

    v = dal.write(pa.RecordBatchReader.from_batches(schema, batches()), NAME, storage_options=OPTIONS)
    print(v.number)
    """
).replace("STREAM_START", "100_000")
STREAMED = list(range(100_000, 220_000))  # the stream writer's rows


def stream_writer(name: str, options: dict[str, str] | None = None) -> str:
    return STREAM_WRITER.replace("NAME", repr(name)).replace("OPTIONS", repr(options))


def gc_code(name: str) -> str:
    return (
        "from datetime import timedelta\nfrom dal.ops import lifecycle\n"
        f"print(lifecycle.gc({name!r}, keep_last=1, safe_age=timedelta(0)).deleted)\n"
    )
