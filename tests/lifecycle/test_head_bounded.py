"""``dal head`` and the web UI's preview read only the files that hold the rows they show (issue #34: a head of a
50,000-file table planned every file's footer first): files past them may be unreadable, and the rows are the
same, in the same order, as the first rows of the whole scan."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dal
from benchmarks.many_files import ROWS, make_table
from dal import lifecycle
from dal.catalog import Catalog
from dal.errors import DalError
from dal.ui.preview import preview


def _spoil(root: Path, keep: int) -> None:
    """Every data file but the first ``keep`` (in path order) overwritten with bytes that are not Parquet."""
    for f in sorted(root.rglob("*.parquet"), key=lambda p: p.relative_to(root).as_posix())[keep:]:
        f.write_bytes(b"not parquet" * 10)


def test_head_reads_the_first_files_only(sqlite_env: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "t"
    make_table(str(root), 60, parts=6)
    dal.register("x.many", str(root))
    whole = dal.open("x.many").to_arrow()
    _spoil(root, keep=3)
    _, rows = lifecycle.head("x.many", n=25)  # three files of ten rows
    assert rows == whole.slice(0, 25).to_pylist()
    _, rows = lifecycle.head("x.many", n=2, columns=["s", "id"], where="id >= 8")
    assert rows == [{"s": "r8", "id": 8}, {"s": "r9", "id": 9}]
    shown = preview(sqlite_env, "x.many", rows=12)
    assert [r["id"] for r in shown["rows"]] == whole.column("id").to_pylist()[:12]
    with pytest.raises(DalError):  # the whole scan would have read them
        lifecycle.head("x.many", n=ROWS * 3 + 1)


def test_head_order_is_the_scans_across_formats(sqlite_env: Catalog) -> None:
    schema = dal.TensorSchema("R", [dal.TensorField("a", np.int64, (), dal.ScalarCodec())])
    for k in range(5):
        dal.write(pa.table({"a": list(range(10 * k, 10 * k + 10))}), "x.peta", format="petastorm", schema=schema)
        dal.write(pa.table({"a": list(range(10 * k, 10 * k + 10))}), "x.delta")
    for name in ("x.peta", "x.delta"):
        whole = dal.open(name).to_arrow().column("a").to_pylist()
        for n in (1, 10, 11, 35, 50, 60):
            _, rows = lifecycle.head(name, n=n)
            assert [r["a"] for r in rows] == whole[:n]
        _, rows = lifecycle.head(name, n=15, where="a IN (3, 17, 18, 44, 45, 46)")
        assert [r["a"] for r in rows] == [a for a in whole if a in (3, 17, 18, 44, 45, 46)]
        _, rows = lifecycle.head(name, n=5, where="a > 1000")
        assert rows == []


def test_a_row_group_larger_than_the_bound_is_read_by_the_scan(
    sqlite_env: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a filter, head reads the first files' row groups whole through ``pyarrow.parquet``
    (``Query.read_file``), but only row groups up to ``PLAIN_GROUP_BYTES``: a larger one goes through the scan,
    which reads a slice of it. The rows are the same either way."""
    from dal.ops import first

    dal.write(pa.table({"a": list(range(5000)), "s": [f"r{i}" for i in range(5000)]}), "x.big")
    whole = dal.open("x.big").to_arrow().slice(0, 4).to_pylist()
    plain = first._plain
    taken: list[bool] = []

    def spied(scan: object, n: int) -> object:
        out = plain(scan, n)  # type: ignore[arg-type]
        taken.append(out is not None)
        return out

    monkeypatch.setattr(first, "_plain", spied)
    assert lifecycle.head("x.big", n=4)[1] == whole
    assert taken == [True]
    monkeypatch.setattr(first, "PLAIN_GROUP_BYTES", 1000)  # the row group is ~60 kB
    assert lifecycle.head("x.big", n=4)[1] == whole
    assert taken == [True, False]
