"""dal optimize: compaction of a dataset's small files into a new version with exactly the same rows (Delta via
delta-rs's compact, Petastorm rewritten by dal); older versions stay readable; gc then reclaims the small files;
datasets dal only registered are refused."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema, lifecycle
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError
from tests.conftest import NOT_SERVED_PG

SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2, 3), NdarrayCodec())]
)


def chunk(i: int) -> pa.Table:
    """Two rows per append: ids 2i and 2i+1, a partition column and a value that depends on the id."""
    ids = [2 * i, 2 * i + 1]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": [f"p{j % 3}" for j in ids],
            "value": pa.array([j * 1.5 for j in ids], pa.float64()),
        }
    )


def written(n: int) -> pa.Table:
    return pa.concat_tables([chunk(i) for i in range(n)]).sort_by("id")


def parquet_files(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*.parquet") if "_delta_log" not in p.parts}


def run(cat: Catalog, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args])
    return r.exit_code, r.stdout, r.stderr


def delta_rs_rows(location: str) -> pa.Table:
    """The table as delta-rs's own query engine reads it (the reference reader)."""
    dt = deltalake.DeltaTable(location)
    sql = "SELECT id, CAST(part AS VARCHAR) AS part, value FROM t ORDER BY id"
    return pa.table(deltalake.QueryBuilder().register("t", dt).execute(sql).read_all())


@pytest.mark.parametrize("catalog_url_or_served", NOT_SERVED_PG, indirect=True)
@pytest.mark.parametrize("partition_by", [None, ["part"]])
def test_delta_fifty_appends_compact_to_a_new_version_with_every_row(
    any_cat: Catalog, partition_by: list[str] | None
) -> None:
    for i in range(50):
        dal.write(chunk(i), "o.d", partition_by=partition_by)
    info = any_cat.get_dataset("o.d")
    before = any_cat.version("o.d")
    expected = written(50)

    result = lifecycle.optimize("o.d")

    assert result.version == before.number + 1
    small = 100 if partition_by else 50  # a two-row append spans two partitions
    assert result.files_before == small and result.files_after == (3 if partition_by else 1)
    new = any_cat.version("o.d")
    assert new.number == before.number + 1
    assert new.schema == before.schema and new.partition_columns == before.partition_columns
    assert new.row_count == 100 and new.operation == "optimize"
    got = dal.open("o.d").to_arrow().sort_by("id")
    assert got.select(["id", "part", "value"]).equals(expected.select(["id", "part", "value"]))
    assert delta_rs_rows(info.location).to_pydict() == expected.to_pydict()
    assert dal.open("o.d").count() == 100
    # the version before the compaction reads as it did
    assert dal.open("o.d", before.number).to_arrow().sort_by("id").select(["id", "part", "value"]).equals(expected)
    if partition_by:
        assert {r.split("/")[0] for r in parquet_files(info.location)} == {"part=p0", "part=p1", "part=p2"}
        assert dal.open("o.d").filter("part = 'p1'").to_arrow().num_rows == len([j for j in range(100) if j % 3 == 1])
    # compact already: nothing is written, no version recorded
    again = lifecycle.optimize("o.d")
    assert again.version is None and any_cat.version("o.d").number == new.number

    # gc reclaims the small files once the older versions expire
    gone = lifecycle.gc("o.d", keep_last=1)
    assert len([r for r in gone.deleted if r.endswith(".parquet")]) == small
    assert len(parquet_files(info.location)) == result.files_after
    assert dal.open("o.d").to_arrow().sort_by("id").select(["id", "part", "value"]).equals(expected)


def test_delta_target_file_size_bounds_the_files(cat: Catalog) -> None:
    for i in range(20):
        dal.write(pa.table({"id": pa.array(range(1000 * i, 1000 * (i + 1)), pa.int64())}), "o.t")
    size = sum(f.stat().st_size for f in Path(cat.get_dataset("o.t").location).glob("*.parquet"))
    result = lifecycle.optimize("o.t", target_file_size=size // 4)
    assert 1 < result.files_after < 20
    assert sorted(dal.open("o.t").to_arrow()["id"].to_pylist()) == list(range(20_000))


def test_petastorm_compacts_into_a_new_version_directory(any_cat: Catalog) -> None:
    def rows(i: int) -> list[dict[str, object]]:
        return [{"id": j, "x": np.full((2, 3), j, np.float32)} for j in (2 * i, 2 * i + 1)]

    dal.write(rows(0), "o.p", format="petastorm", schema=SCHEMA)
    for i in range(1, 12):
        dal.write(rows(i), "o.p", format="petastorm")
    before = any_cat.version("o.p")
    expected = dal.open("o.p").to_arrow().sort_by("id")
    assert expected["id"].to_pylist() == list(range(24))

    result = lifecycle.optimize("o.p")

    assert result.version == before.number + 1 and result.files_before == 12 and result.files_after == 1
    new = any_cat.version("o.p")
    assert new.schema == before.schema and new.row_count == 24
    got = dal.open("o.p").to_arrow().sort_by("id")
    assert got.equals(expected)
    decoded = dal.open("o.p").to_numpy()
    by_id = dict(zip(decoded["id"].tolist(), decoded["x"], strict=True))
    assert sorted(by_id) == list(range(24))
    assert all(np.array_equal(by_id[j], np.full((2, 3), j, np.float32)) for j in range(24))
    assert dal.open("o.p", before.number).to_arrow().sort_by("id").equals(expected)
    location = any_cat.get_dataset("o.p").location
    gone = lifecycle.gc("o.p", keep_last=1)
    assert gone.expired and dal.open("o.p").to_arrow().sort_by("id").equals(expected)
    assert len(parquet_files(location)) == 1


def test_plain_parquet_and_bad_arguments_are_refused(cat: Catalog, tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), folder / "a.parquet")
    pq.write_table(pa.table({"id": [3]}), folder / "b.parquet")
    dal.register("o.plain", str(folder), format="parquet")
    with pytest.raises(DalError, match="registered read-only: optimize does not rewrite it"):
        lifecycle.optimize("o.plain")
    assert sorted(p.name for p in folder.iterdir()) == ["a.parquet", "b.parquet"]
    dal.write(chunk(0), "o.d")
    for bad in (0, -5, "1GB", True):
        with pytest.raises(DalError, match="target_file_size"):
            lifecycle.optimize("o.d", target_file_size=bad)  # type: ignore[arg-type]
    code, out, err = run(cat, "optimize", "o.plain")
    assert code == 1 and out == "" and err.count("\n") == 1 and "optimize does not rewrite it" in err


def test_cli_one_line_and_json(cat: Catalog) -> None:
    for i in range(5):
        dal.write(chunk(i), "o.c")
    code, out, err = run(cat, "optimize", "o.c", "--target-file-size", "64MiB")
    assert code == 0, err
    assert out.count("\n") == 1 and out.startswith("o.c: version 5: 5 file(s)") and "into 1 (" in out
    code, out, err = run(cat, "optimize", "o.c", "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "dataset": "o.c",
        "version": None,
        "files_before": 1,
        "files_after": 1,
        "bytes_before": json.loads(out)["bytes_before"],
        "bytes_after": json.loads(out)["bytes_before"],
    }
    code, out, err = run(cat, "optimize", "o.c", "--target-file-size", "lots")
    assert code == 2 and "is not a size" in err


def test_partitioned_petastorm_keeps_its_partitions(cat: Catalog) -> None:
    schema = TensorSchema(
        "P",
        [
            TensorField("id", np.int64, (), ScalarCodec()),
            TensorField("cam", np.int32, (), ScalarCodec()),
            TensorField("x", np.float32, (2,), NdarrayCodec()),
        ],
    )
    for i in range(8):
        rows = [{"id": j, "cam": np.int32(j % 3), "x": np.full(2, j, np.float32)} for j in (2 * i, 2 * i + 1)]
        dal.write(rows, "o.pp", format="petastorm", schema=schema if i == 0 else None, partition_by=["cam"])
    before = cat.version("o.pp")
    expected = dal.open("o.pp").to_arrow().sort_by("id")
    result = lifecycle.optimize("o.pp")
    assert result.files_before == 16 and result.files_after == 3
    new = cat.version("o.pp")
    assert new.partition_columns == before.partition_columns == ("cam",) and new.schema == before.schema
    assert dal.open("o.pp").to_arrow().sort_by("id").equals(expected)
    assert sorted(dal.open("o.pp").filter("cam = 1").to_arrow()["id"].to_pylist()) == [
        j for j in range(16) if j % 3 == 1
    ]
