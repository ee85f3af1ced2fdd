"""A rank, a world size, a piece and a count of pieces are integers of any kind (issue 32): a NumPy integer
(``np.int64`` from an array of ranks) is taken as the int it is, where it was refused; a bool, a
timedelta64 (NumPy files it under integers) or a float is refused, where ``shard(True, 2)`` was rank 1."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import FilterError

N = 90


@pytest.fixture
def written(sqlite_env: Catalog) -> pa.Table:
    table = pa.table({"id": np.arange(N, dtype=np.int64)})
    for part in (table.slice(0, 40), table.slice(40)):
        dal.write(part, "sh")
    return table


def test_numpy_ranks_share_the_rows(written: pa.Table) -> None:
    scan = dal.open("sh").scan()
    seen: list[int] = []
    for rank in np.arange(3):
        ids = scan.shard(rank, np.int64(3), remainder="keep").to_arrow().column("id").to_pylist()
        assert ids == scan.shard(int(rank), 3, remainder="keep").to_arrow().column("id").to_pylist()
        seen += ids
    assert sorted(seen) == written.column("id").to_pylist()  # the reference: the rows written, each once
    pieces = [scan.split(np.uint8(i), np.int32(2)) for i in range(2)]
    assert pieces == [scan.split(0, 2), scan.split(1, 2)]
    assert sum(t.live_rows - t.offset if t.length is None else t.length for p in pieces for t in p) == N


@pytest.mark.parametrize("bad", [True, np.bool_(True), np.timedelta64(1, "s"), 1.0, np.float64(1), "1"], ids=repr)
def test_ranks_that_are_not_integers_are_refused(written: pa.Table, bad: Any) -> None:
    scan = dal.open("sh").scan()
    with pytest.raises(FilterError, match="rank"):
        scan.shard(bad, 2)
    with pytest.raises(FilterError, match="world_size"):
        scan.shard(0, bad)
    with pytest.raises(FilterError, match="index"):
        scan.split(bad, 2)
    with pytest.raises(FilterError, match="parts"):
        scan.split(0, bad)
    with pytest.raises(FilterError, match="rank"):
        dal.mix([scan, scan]).shard(bad, 2)
