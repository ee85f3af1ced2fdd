"""``dal stats`` on list, struct and map columns (issue 32): their footer statistics sit on leaf columns
(``v.list.element``, ``s.a``, ``m.key_value.key``), not on a column named ``v``, and every such column was
reported 100 % null. A leaf's null count counts null and empty lists, null elements and null fields too, so it
gives a column's null rows exactly only when it is 0; otherwise the nulls are unknown (``None``, ``?`` in the
CLI), never a wrong number. References: pyarrow's and pandas' null counts of the data written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.ops import lifecycle

N = 40


def _table(k: int) -> pa.Table:
    rng = np.random.default_rng(k)
    ids = np.arange(k * N, (k + 1) * N)
    holes = [None if i % 7 == 0 else ([] if i % 5 == 0 else [float(i), None]) for i in ids]
    return pa.table(
        {
            "id": ids,
            "vec": pa.array([rng.standard_normal(3).astype(np.float32) for _ in ids], pa.list_(pa.float32())),
            "holes": pa.array(holes, pa.list_(pa.float64())),
            "point": pa.array([{"x": float(i), "y": None if i % 3 else 1.0} for i in ids]),
            "maybe_point": pa.array([None if i % 4 == 0 else {"x": 1.0, "y": 2.0} for i in ids]),
            "tags": pa.array([[("k", int(i))] for i in ids], pa.map_(pa.string(), pa.int64())),
            "img": pa.FixedSizeListArray.from_arrays(pa.array(rng.integers(0, 255, N * 4, dtype=np.uint8)), 4),
        }
    )


def _nulls(table: pa.Table) -> dict[str, int]:
    """Null rows per column, by pyarrow, checked against pandas."""
    out = {c: table.column(c).null_count for c in table.column_names}
    frame = table.to_pandas()
    assert out == {c: int(frame[c].isna().sum()) for c in table.column_names}
    return out


def test_nested_columns_are_exact_when_the_footer_proves_it_else_unknown(sqlite_env: Catalog) -> None:
    parts = [_table(0), _table(1)]
    for part in parts:
        dal.write(part, "st.nested")
    want = _nulls(pa.concat_tables(parts))
    cols = {c.name: c for c in lifecycle.stats("st.nested").columns}
    # a leaf without a null proves the rows have none: vec (its elements), point (x), tags (keys), img (binary)
    for name in ("id", "vec", "point", "tags", "img"):
        assert cols[name].nulls == want[name] == 0, name
    # null and empty lists and null elements, null structs: their leaves cannot tell rows apart
    assert want["holes"] > 0 and want["maybe_point"] > 0
    assert cols["holes"].nulls is None and cols["maybe_point"].nulls is None
    for c in cols.values():  # never a wrong number; an element's or a field's bounds are not the column's
        assert c.nulls is None or c.nulls == want[c.name], c.name
        if c.name in ("vec", "holes", "point", "maybe_point", "tags"):
            assert c.min is None and c.max is None
    assert cols["id"].min == 0 and cols["id"].max == 2 * N - 1


def test_a_dotted_name_beside_a_struct_is_its_own_column(sqlite_env: Catalog, tmp_path: Path) -> None:
    # "a.b" (a column) and "a" (a struct with field b): both leaves have the path "a.b"
    table = pa.table(
        {
            "a": pa.array([{"b": i} for i in range(10)]),
            "a.b": pa.array([None if i % 2 else i * 100 for i in range(10)], pa.int64()),
        }
    )
    (tmp_path / "p").mkdir()
    pq.write_table(table, tmp_path / "p" / "part-0.parquet")
    dal.register("st.dotted", str(tmp_path / "p"), format="parquet")
    want = _nulls(table)
    cols = {c.name: c for c in lifecycle.stats("st.dotted").columns}
    assert cols["a.b"].nulls == want["a.b"] == 5 and cols["a"].nulls == want["a"] == 0
    assert (cols["a.b"].min, cols["a.b"].max) == (0, 800)


@pytest.mark.parametrize("rows_null", [0, 3])
def test_a_nullable_list_with_no_null_element(sqlite_env: Catalog, rows_null: int) -> None:
    values = [[float(i)] for i in range(10)]
    for i in range(rows_null):
        values[i] = None
    table = pa.table({"v": pa.array(values, pa.list_(pa.float64()))})
    dal.write(table, "st.list")
    got = {c.name: c for c in lifecycle.stats("st.list").columns}["v"].nulls
    assert got == (_nulls(table)["v"] if rows_null == 0 else None)
