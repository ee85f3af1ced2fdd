"""Delta per-file statistics of dal's own Parquet writer (the Spark path): nested like the protocol says,
decodable by delta-rs, and in agreement with the statistics delta-rs writes for the same data."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

from dal.formats.delta.staging import write_files
from dal.formats.delta.stats import FileStats, leaves
from dal.formats.delta.types import problems, target_schema
from tests.writes.test_arrow_types import tables


def mixed_table() -> pa.Table:
    """A struct (nested twice) and a boolean, with arrays, maps, binary, decimals and both timestamps."""
    return pa.table(
        {
            "id": pa.array([3, 1, 2], pa.int64()),
            "flag": pa.array([True, None, False]),
            "s": pa.array([{"a": 1, "b": "x", "n": {"c": 1.5, "ok": True}}, {"a": None, "b": "y", "n": None}, None]),
            "bin": pa.array([b"a", b"b", None]),
            "dec": pa.array([Decimal("1.23"), None, Decimal("-4.50")], pa.decimal128(5, 2)),
            "d": pa.array([date(2020, 1, 1), None, date(2021, 1, 1)]),
            "ts": pa.array(
                [datetime(2020, 1, 1, 1, 2, 3, 456789), None, datetime(2021, 1, 1)], pa.timestamp("us", "UTC")
            ),
            "ntz": pa.array([datetime(2020, 1, 1, 1, 2, 3, 456789), None, datetime(2021, 1, 1)], pa.timestamp("us")),
            "arr": pa.array([[1, 2], None, []]),
            "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
            "f": pa.array([1.5, float("nan"), None]),
        }
    )


def test_nested_columns_get_nested_statistics() -> None:
    stats = FileStats(mixed_table().schema)
    stats.add(mixed_table())
    assert stats.to_dict() == {
        "numRecords": 3,
        # no booleans, binary, decimals, arrays or maps; timestamps widened to whole milliseconds
        "minValues": {"id": 1, "s": {"a": 1, "b": "x", "n": {"c": 1.5}}, "d": "2020-01-01",
                      "ts": "2020-01-01T01:02:03.456Z", "ntz": "2020-01-01T01:02:03.456", "f": 1.5},
        "maxValues": {"id": 3, "s": {"a": 1, "b": "y", "n": {"c": 1.5}}, "d": "2021-01-01",
                      "ts": "2021-01-01T00:00:00.000Z", "ntz": "2021-01-01T00:00:00.000"},  # f: has a NaN
        # a nested leaf counts the rows where it or a parent is null
        "nullCount": {"id": 0, "flag": 1, "s": {"a": 2, "b": 1, "n": {"c": 2, "ok": 2}}, "bin": 1, "dec": 1,
                      "d": 1, "ts": 1, "ntz": 1, "f": 1},
    }  # fmt: skip


def test_statistics_agree_with_what_delta_rs_writes(tmp_path: Path) -> None:
    table = mixed_table()
    deltalake.write_deltalake(tmp_path, table)
    (line,) = [a for a in map(json.loads, (tmp_path / "_delta_log" / f"{0:020d}.json").open()) if "add" in a]
    theirs = json.loads(line["add"]["stats"])
    ours = FileStats(table.schema)
    ours.add(table)
    mine = ours.to_dict()
    # the same nested counts; delta-rs leaves binary out of nullCount, which the protocol (and delta-kernel's
    # stats schema) counts
    assert {k: v for k, v in mine["nullCount"].items() if k != "bin"} == theirs["nullCount"]
    assert mine["nullCount"]["bin"] == 1

    def paths(d: dict[str, Any], prefix: str = "") -> set[str]:
        return {p for k, v in d.items() for p in (paths(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k})}

    # the bounds dal writes are a subset of delta-rs's (minus the types without a skipping order)
    assert paths(mine["minValues"]) <= paths(theirs["minValues"])
    assert paths(theirs["minValues"]) - paths(mine["minValues"]) <= {"flag", "dec", "s.n.ok"}


def commit_like_the_spark_driver(location: Path, table: pa.Table, partition_by: list[str]) -> None:
    """What dal.spark does without Spark: executors' write_files, the driver's one commit."""
    rows = write_files(table.to_batches(max_chunksize=2), str(location), partition_by, {})
    actions = [
        deltalake.transaction.AddAction(
            path=r["path"], size=r["size"], partition_values=json.loads(r["partition_values"]),
            modification_time=r["modification_time"], data_change=True, stats=r["stats"],
        )
        for r in rows
    ]  # fmt: skip
    deltalake.transaction.create_table_with_add_actions(
        str(location),
        deltalake.Schema.from_arrow(table.schema),
        actions,
        mode="error",
        partition_by=partition_by or None,
    )


@pytest.mark.parametrize("partition_by", [[], ["flag"]])
def test_a_struct_and_a_boolean_commit_statistics_delta_rs_decodes(tmp_path: Path, partition_by: list[str]) -> None:
    """Issue 12: nullCount {"s": 3} for a struct made the table unreadable ("expected {")."""
    table = mixed_table()
    commit_like_the_spark_driver(tmp_path, table, partition_by)
    dt = deltalake.DeltaTable(tmp_path)
    back = dt.to_pyarrow_table().select(table.column_names).sort_by("id")
    assert back.drop_columns(["f"]).to_pylist() == table.sort_by("id").drop_columns(["f"]).to_pylist()
    assert back.column("f").to_pylist()[1:] == [None, 1.5]  # (NaN != NaN)
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in actions) == 3
    assert sum(a["null_count.s.n.c"] for a in actions) == 2  # the nested counts were decoded
    # statistics are used for skipping: a filter on a nested leaf keeps exactly the matching rows
    qb = deltalake.QueryBuilder().register("t", dt)
    hit = pa.table(qb.execute("select id from t where s.a = 1").read_all())
    assert hit.column("id").to_pylist() == [3]


def test_only_the_first_32_leaves_are_described() -> None:
    schema = pa.schema(
        [("tags", pa.list_(pa.int64()))]
        + [(f"c{i}", pa.struct([("x", pa.int64()), ("y", pa.bool_())])) for i in range(20)]
    )
    found = leaves(schema)
    assert len(found) == 32 and found[0] == (("c0", "x"), pa.int64()) and found[-1][0] == ("c15", "y")


def test_bounds_are_never_inexact() -> None:
    long = "z" * 40
    table = pa.table(
        {
            "s": [long, "a" + long],
            "f": [float("-inf"), 2.0],
            "ts": pa.array([datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)] * 2, pa.timestamp("us", "UTC")),
        }
    )
    stats = FileStats(table.schema)
    stats.add(table)
    d = stats.to_dict()
    assert d["minValues"] == {"s": "a" + "z" * 31, "ts": "9999-12-31T23:59:59.999Z"}  # a prefix is <= the value
    assert d["maxValues"] == {"f": 2.0}  # no exact max for a 41-char string or past year 9999


def _leaf_values(table: pa.Table, path: tuple[str, ...]) -> list[Any]:
    from dal.formats.delta.stats import _column

    return [v for v in _column(table, path).to_pylist() if v is not None]


def _parse(bound: Any, like: Any) -> Any:
    if isinstance(like, datetime):
        parsed = datetime.fromisoformat(bound)
        return parsed if like.tzinfo is not None else parsed.replace(tzinfo=None)
    if isinstance(like, date):
        return date.fromisoformat(bound)
    return bound


@settings(
    max_examples=int(os.environ.get("DAL_PROPERTY_EXAMPLES", "40")),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=tables())
def test_random_tables_committed_like_the_spark_driver_have_sound_statistics(tmp_path: Path, data: pa.Table) -> None:
    if problems(data.schema):
        return
    data = data.cast(target_schema(data.schema))  # what Spark hands over: signed integers, microseconds
    location = tmp_path / uuid.uuid4().hex
    commit_like_the_spark_driver(location, data, [])
    dt = deltalake.DeltaTable(location)
    assert dt.to_pyarrow_table().sort_by("_row").to_pylist() == data.to_pylist()
    pa.table(dt.get_add_actions(flatten=True))  # delta-rs decodes every file's statistics
    for line in (location / "_delta_log" / f"{0:020d}.json").open():
        add = json.loads(line).get("add")
        if add is None:
            continue
        stats = json.loads(add["stats"])
        file = pq.read_table(location / add["path"])
        assert stats["numRecords"] == file.num_rows
        for path, _ in leaves(file.schema):
            node_min, node_max, nulls = stats["minValues"], stats["maxValues"], stats["nullCount"]
            for name in path:
                node_min, node_max, nulls = node_min.get(name, {}), node_max.get(name, {}), nulls[name]
            values = _leaf_values(file, path)
            assert nulls == file.num_rows - len(values)
            if node_min != {}:
                assert all(_parse(node_min, v) <= v for v in values), path
            if node_max != {}:
                assert all(_parse(node_max, v) >= v for v in values), path
