"""The six legacy datasets of petastorm's own test suite (written by petastorm 0.4.0 ... 0.7.6 under Python 2,
their Unischema a protocol-0 pickle), registered and read by dal with every deterministic value exact.

The deterministic values are those of ``create_test_dataset`` in each version's ``petastorm/tests/test_common.py``
(listed in the corpus MANIFEST): ``id`` 0..99, ``partition_key`` ``p_{id // 10}``, ``id2`` ``id % 2``,
``id_float``, ``id_odd``, ``sensor_name`` ``["test_sensor"]``, ``matrix_nullable`` None, ``empty_matrix_string``
``[]``, ``string_array_nullable`` and ``integer_nullable``; the random fields are checked for dtype and shape.
petastorm 0.13.1 itself reads only ``legacy__0.7.6`` (the slow test checks that, and that dal's values of
0.7.6 are exactly what its ``make_reader`` decodes, every field of every row).
"""

from __future__ import annotations

import json
import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.formats.petastorm.unischema import ROWGROUPS_INDEX_KEY, loads_rowgroup_indexes
from tests.conformance.conftest import corpus_tables, require_corpus

VERSIONS = ("0.4.0", "0.4.3", "0.5.1", "0.6.0", "0.7.0", "0.7.6")


@pytest.fixture
def cat(sqlite_env: Catalog) -> Catalog:
    return sqlite_env


def copy_dataset(version: str, into: Path) -> Path:
    """A writable copy of ``petastorm/legacy__<version>`` (the corpus is read in place, never modified)."""
    src = require_corpus() / "petastorm" / f"legacy__{version}"
    dst = into / f"legacy__{version}"
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for root, dirs, _ in os.walk(dst):
        for d in [root, *(os.path.join(root, x) for x in dirs)]:
            os.chmod(d, 0o755)
    return dst


def test_the_manifest_lists_the_six_legacy_datasets() -> None:
    require_corpus()
    assert sorted(t["petastorm_version"] for t in corpus_tables("petastorm")) == sorted(VERSIONS)


def expected_row(ident: int, version: str) -> dict[str, Any]:
    """The deterministic values of row ``ident`` (test_common.py's create_test_dataset)."""
    strings = None if ident % 5 == 0 else [] if ident % 4 == 0 else [str(ident), str(ident + 1)]
    row: dict[str, Any] = {
        "id": ident,
        "partition_key": f"p_{ident // 10}",
        "id2": ident % 2,
        "sensor_name": ["test_sensor"],
        "matrix_nullable": None,
        "empty_matrix_string": [],
        "string_array_nullable": strings,
    }
    if version >= "0.5.1":
        row.update(id_float=float(ident), id_odd=bool(ident % 2))
    if version >= "0.7.6":
        row["integer_nullable"] = None if ident % 2 else ident
    return row


# dtype and per-row shape of every field (the random ones included), as petastorm decodes them
SHAPES: dict[str, tuple[str, tuple[int | None, ...]]] = {
    "matrix": ("float32", (32, 16, 3)),
    "image_png": ("uint8", (32, 16, 3)),
    "matrix_uint16": ("uint16", (32, 16, 3)),
    "matrix_uint32": ("uint32", (32, 16, 3)),
    "sensor_name": ("<U11", (1,)),
    "empty_matrix_string": ("|S1", (0,)),
}


def legacy_problems(got: dict[str, Any], version: str) -> list[str]:
    """Every way dal's decoded columns of ``legacy__<version>`` differ from the deterministic values (and the
    dtypes and shapes of the random fields); empty when all 100 rows are exact."""
    problems = []
    ids = [int(i) for i in got["id"]]
    if sorted(ids) != list(range(100)):
        return [f"{version}: ids are {sorted(ids)[:5]}..., not 0..99"]
    dtypes = {"id": "int64", "id2": "int32", "python_primitive_uint8": "uint8", "id_float": "float64", "id_odd": "bool"}
    problems += [
        f"{version}: {k} is {got[k].dtype}, not {t}" for k, t in dtypes.items() if k in got and got[k].dtype != t
    ]
    for row, ident in enumerate(ids):
        for field, expected in expected_row(ident, version).items():
            value = got[field][row] if field in got else "<missing>"
            if isinstance(value, np.ndarray):
                value = value.tolist()
            if field == "empty_matrix_string" and isinstance(value, list):
                value = [x.decode() for x in value]
            if field == "integer_nullable" and value is not None and type(value) is not np.int32:
                problems.append(f"{version} id {ident}: integer_nullable is a {type(value).__name__}, not int32")
            if value != expected or (expected is None) != (value is None):
                problems.append(f"{version} id {ident}: {field} = {value!r}, expected {expected!r}")
        for field, (dtype, shape) in SHAPES.items():
            if field in got:
                cell = np.asarray(got[field][row])
                if cell.dtype.str != np.dtype(dtype).str or cell.shape != shape:
                    problems.append(f"{version} id {ident}: {field} is {cell.dtype} {cell.shape}")
        dec = got["decimal"][row]
        if not isinstance(dec, Decimal) or dec.as_tuple().exponent != -9 or len(dec.as_tuple().digits) > 10:
            problems.append(f"{version} id {ident}: decimal = {dec!r}, not a Decimal(10, 9)")
        strings = np.asarray(got["matrix_string"][row])
        if strings.dtype.kind != "S" or strings.ndim != (1 if version < "0.6.0" else 2):
            problems.append(f"{version} id {ident}: matrix_string is {strings.dtype} {strings.shape}")
    return problems


EXACT, DIFFERENT, REFUSED, RAW_CRASH = "values exact", "values differ", "refused (DalError)", "raw crash"


def classify_legacy(version: str, work: Path) -> tuple[str, list[str]]:
    """Register a copy of ``legacy__<version>`` in a fresh catalog under ``work`` and check every value
    (for benchmarks/conformance_report.py): the class and what differs."""
    from dal.errors import DalError

    catalog = f"sqlite:///{work}/catalog.db"
    try:
        path = copy_dataset(version, work)
        dal.register("legacy.dataset", str(path), format="petastorm", catalog=catalog)
        got = dal.open("legacy.dataset", catalog=catalog).to_numpy()
    except DalError as e:
        return REFUSED, [str(e)]
    except Exception as e:
        return RAW_CRASH, [f"{type(e).__name__}: {e}"]
    problems = legacy_problems(got, version)
    return (DIFFERENT if problems else EXACT), problems


@pytest.mark.parametrize("version", VERSIONS)
def test_legacy_dataset_registers_and_reads_exactly(cat: Catalog, tmp_path: Path, version: str) -> None:
    path = copy_dataset(version, tmp_path)
    name = f"legacy.v{version.replace('.', '_')}"
    (v,) = dal.register(name, str(path), format="petastorm")
    assert (v.number, v.row_count, v.file_count, v.partition_columns) == (0, 100, 10, ("partition_key",))
    assert {p.key: p.row_count for p in cat.partitions(name)} == {f"partition_key=p_{i}": 10 for i in range(10)}
    fields = {f.name: f for f in v.schema}
    assert fields["decimal"].type == "decimal128(10, 9)" and fields["id2"].type == "int16"  # as Spark stored them
    assert (fields["matrix"].dtype, fields["matrix"].shape, fields["matrix"].codec) == (
        "float32",
        (32, 16, 3),
        "ndarray",
    )
    assert fields["image_png"].codec == "image/png" and fields["matrix_nullable"].nullable

    got = dal.open(name).to_numpy()
    assert set(got) == set(fields)
    problems = legacy_problems(got, version)
    assert not problems, "\n".join(problems[:20])
    # the other read paths decode the same way
    frame = dal.open(name).to_pandas()
    assert sorted(frame["id"]) == list(range(100)) and frame["decimal"].map(type).eq(Decimal).all()
    batches = list(dal.open(name).iter_numpy(batch_size=7, columns=["id", "string_array_nullable"]))
    assert sum(len(b["id"]) for b in batches) == 100


@pytest.mark.parametrize("version", VERSIONS)
def test_legacy_rowgroup_indexes_read_without_unpickling(tmp_path: Path, version: str) -> None:
    """The row-group indexes (a Python 2 protocol-2 pickle of numpy scalars in defaultdicts of sets) agree
    with the data: every id in exactly one row group, the sensor name in all, the string values where
    they are."""
    meta = pq.read_schema(require_corpus() / "petastorm" / f"legacy__{version}" / "_common_metadata").metadata
    indexes = loads_rowgroup_indexes(meta[ROWGROUPS_INDEX_KEY])
    expected = {"id", "sensor_name", "string_array_nullable"} | ({"partition_key"} if version >= "0.6.0" else set())
    assert set(indexes) == expected
    ids = indexes["id"].pieces
    assert sorted(ids) == list(range(100)) and all(len(p) == 1 for p in ids.values())
    assert dict(indexes["sensor_name"].pieces) == {"test_sensor": frozenset(range(10))}
    strings = {str(i) for i in range(100) if i % 5 and i % 4} | {str(i + 1) for i in range(100) if i % 5 and i % 4}
    assert set(indexes["string_array_nullable"].pieces) == strings
    # rows of one partition (id // 10) share a row group
    assert all(ids[i] == ids[i - i % 10] for i in range(100))


@pytest.mark.slow
def test_petastorm_itself_reads_only_0_7_6_and_dal_matches_it(cat: Catalog, tmp_path: Path) -> None:
    from tests.petastorm.legacy import run_legacy
    from tests.petastorm.petastorm_values import load, mismatch

    paths = {version: copy_dataset(version, tmp_path) for version in VERSIONS}
    out = tmp_path / "petastorm.json"
    proc = run_legacy("petastorm_read_json.py", str(out), *(f"file://{p}" for p in paths.values()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    by_version = {version: result[f"file://{p}"] for version, p in paths.items()}
    # petastorm 0.13.1 (pyspark 3.5) cannot unpickle the schema pyspark 2 wrote
    for version in VERSIONS[:-1]:
        assert "Can't get attribute '_restore' on <module 'pyspark.serializers'" in by_version[version]["error"]
    reference = by_version["0.7.6"]
    assert "error" not in reference and not reference["failed_fields"] and len(reference["rows"]) == 100

    dal.register("legacy.v0_7_6", str(paths["0.7.6"]), format="petastorm")
    got = dal.open("legacy.v0_7_6").to_numpy()
    problems = []
    for row, ident in enumerate(int(i) for i in got["id"]):
        expected = reference["rows"][str(ident)]
        assert set(expected) == set(got)
        for field in sorted(got):
            why = mismatch(got[field][row], load(expected[field]))
            if why:
                problems.append(f"id {ident}, {field}: {why}")
    assert not problems, "\n".join(problems[:30])
