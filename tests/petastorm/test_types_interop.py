"""Every type petastorm 0.13.1 writes, decoded by dal exactly as petastorm's own make_reader decodes it.

petastorm (in its pinned legacy venv) writes a dataset with Spark + materialize_dataset holding every scalar
type (bool, int8..int64, uint8/16 in wider Spark types, float16/32/64, str, timestamp, date, Decimal, each
also nullable), ndarrays of every numeric dtype, string/bytes/datetime arrays, empty and nullable arrays,
compressed arrays and png/jpeg images; then reads it back with make_reader. Every value petastorm decoded is
compared, dtype, shape and bytes, with dal's ``to_numpy`` of the registered dataset.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dal
from dal.catalog import Catalog
from dal.formats.petastorm.unischema import loads_unischema
from tests.petastorm.legacy import run_legacy
from tests.petastorm.petastorm_values import load, mismatch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    tmp = tmp_path_factory.mktemp("petastorm_types")
    out, values, pickles = tmp / "ds", tmp / "values.json", tmp / "pickles"
    proc = run_legacy("petastorm_types.py", str(out), str(values), str(pickles))
    assert proc.returncode == 0 and "READ 24" in proc.stdout, proc.stderr[-3000:]
    return out, json.loads(values.read_text()), pickles


def test_every_value_decodes_as_petastorm_decodes_it(
    cat: Catalog, written: tuple[Path, dict[str, Any], Path], tmp_path: Path
) -> None:
    out, reference, _ = tmp_path / "ds", written[1], written[2]
    shutil.copytree(written[0], out)  # each catalog registers its own copy: the first to register claims its files
    (v,) = dal.register("legacy.all_types", str(out), format="petastorm")
    assert v.row_count == 24 and v.partition_columns == ("part",)
    got = dal.open("legacy.all_types").to_numpy()
    ids = [int(i) for i in got["id"]]
    assert sorted(ids) == list(range(24))
    rows = reference["rows"]
    fields = set(next(iter(rows.values())))
    # petastorm cannot decode a nullable timestamp holding a null at all (np.datetime64(NaT) raises in its
    # make_reader); dal gives what was written, None for the nulls
    assert set(reference["failed_fields"]) == {"n_ts"}
    assert fields | {"n_ts"} == set(got)
    problems = []
    for row, ident in enumerate(ids):
        for name in sorted(got):
            if name in reference["written"]:
                expected = load(reference["written"][name][str(ident)])
            else:
                expected = load(rows[str(ident)][name])
            why = mismatch(got[name][row], expected)
            if why:
                problems.append(f"id {ident}, {name}: {why}")
    assert not problems, "\n".join(problems[:30])
    # scalar columns keep numpy types: typed arrays when no cell is null, else objects with None
    assert got["ts"].dtype == np.dtype("datetime64[us]") and got["day"].dtype == np.dtype("datetime64[D]")
    assert got["u8"].dtype == np.uint8 and got["f16"].dtype == np.float16 and got["n_i32"].dtype == object
    assert got["n_f64"].dtype == np.float64 and got["dec"].dtype == object


def test_every_pickle_protocol_of_the_unischema_loads(written: tuple[Path, dict[str, Any], Path]) -> None:
    out, _, pickles = written
    import pyarrow.parquet as pq

    stored = pq.read_schema(out / "_common_metadata")
    from_metadata = loads_unischema(stored.metadata[b"dataset-toolkit.unischema.v1"])
    blobs = sorted(pickles.glob("unischema.*.pickle"))
    assert len(blobs) == 6  # protocols 0-5
    for blob in blobs:
        assert loads_unischema(blob.read_bytes()) == from_metadata, blob.name
    names = {f.name: f for f in loads_unischema(stored.metadata[b"dataset-toolkit.unischema.v1"], stored)}
    assert (names["dec"].dtype_name, str(names["dec"].storage_type())) == ("decimal", "decimal128(12, 4)")
    assert str(names["ts"].storage_type()) == "timestamp[us]" and str(names["day"].storage_type()) == "date32[day]"
    assert str(names["u8"].storage_type()) == "int16"  # petastorm stores uint8 in a Spark ShortType


def test_petastorm_reads_the_types_dal_writes_as_dal_decodes_them(cat: Catalog, tmp_path: Path) -> None:
    """Timestamps, dates, Decimals, narrow storage (uint8 in int16, float16 in float32), nullable scalars and
    arrays written by dal: petastorm's make_reader decodes every value exactly as dal does."""
    import datetime
    from decimal import Decimal

    import pyarrow as pa

    from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema

    schema = TensorSchema("DalTypes", [
        TensorField("id", np.int32),
        TensorField("ts", np.datetime64, (), ScalarCodec(pa.timestamp("us"))),
        TensorField("day", np.datetime64, (), ScalarCodec(pa.date32()), nullable=True),
        TensorField("dec", Decimal, (), ScalarCodec(pa.decimal128(10, 3)), nullable=True),
        TensorField("u8", np.uint8, (), ScalarCodec(pa.int16())),
        TensorField("f16", np.float16, (), ScalarCodec(pa.float32())),
        TensorField("n_i64", np.int64, (), nullable=True),
        TensorField("text", np.str_, (), nullable=True),
        TensorField("words", np.str_, (None,), NdarrayCodec(), nullable=True),
    ])  # fmt: skip
    rows = [
        {
            "id": i,
            "ts": np.datetime64("2020-01-01T00:00:00.123456") + np.timedelta64(37 * i, "h"),
            "day": None if i % 3 == 1 else datetime.date(1969, 12, 31) + datetime.timedelta(days=400 * i),
            "dec": None if i % 4 == 2 else Decimal(f"{i * 7 - 20}.{i:03d}"),
            "u8": 250 + i % 6,
            "f16": np.float16(i / 3),
            "n_i64": None if i % 2 else 2**40 + i,
            "text": None if i % 5 == 0 else f"t{i} é",
            "words": None if i % 4 == 0 else np.array([f"w{j}" for j in range(i % 3)], dtype=np.str_),
        }
        for i in range(12)
    ]
    dal.write(rows, "dal.types", format="petastorm", schema=schema)
    out = tmp_path / "read.json"
    proc = run_legacy("petastorm_read_json.py", str(out), dal.open("dal.types").petastorm_url)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (theirs,) = json.loads(out.read_text()).values()
    assert "error" not in theirs and not theirs["failed_fields"] and len(theirs["rows"]) == 12
    got = dal.open("dal.types").to_numpy()
    problems = []
    for row, ident in enumerate(int(i) for i in got["id"]):
        for name in sorted(got):
            why = mismatch(got[name][row], load(theirs["rows"][str(ident)][name]))
            if why:
                problems.append(f"id {ident}, {name}: {why}")
    assert not problems, "\n".join(problems[:30])


def test_python3_rowgroup_indexes_read_without_unpickling(written: tuple[Path, dict[str, Any], Path]) -> None:
    """petastorm 0.13.1's build_rowgroup_index pickles at protocol 5 (STACK_GLOBAL, numpy scalars of str
    and int, sets as opcodes): dal reads every index and it agrees with the data."""
    import pyarrow.parquet as pq

    from dal.formats.petastorm.unischema import ROWGROUPS_INDEX_KEY, loads_rowgroup_indexes

    out, reference, _ = written
    indexes = loads_rowgroup_indexes(pq.read_schema(out / "_common_metadata").metadata[ROWGROUPS_INDEX_KEY])
    assert {k: (v.column, v.kind) for k, v in indexes.items()} == {
        "id_index": ("id", "SingleFieldIndexer"),
        "text_index": ("text", "SingleFieldIndexer"),
        "n_text_not_null": ("n_text", "FieldNotNullIndexer"),
    }
    assert sorted(indexes["id_index"].pieces) == list(range(24))
    texts = {load(r["text"]) for r in reference["rows"].values()}
    assert set(indexes["text_index"].pieces) == texts and "héllo 5 ✓" in texts
    pieces = indexes["n_text_not_null"].pieces[None]
    assert pieces and all(isinstance(p, int) for p in pieces)
