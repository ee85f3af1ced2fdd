"""dal.mix: several scans as one stream in given proportions, deterministic per epoch."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.errors import DalError
from dal.read.sampling import apportion
from tests.sampling.conftest import ids, within


def source(i: int) -> int:
    return 1 if i >= 100_000 else 0  # other's ids start at 100000


def test_rows_mix_has_exact_counts_and_binomial_batches(data: dal.Dataset, other: dal.Dataset) -> None:
    weights, rows = [0.25, 0.75], 3000
    mixed = dal.mix([data.scan(), other.scan()], weights, seed=1, rows=rows)
    got = ids(mixed.to_arrow())
    n = Counter(source(i) for i in got)
    assert [n[0], n[1]] == apportion(rows, weights) and len(got) == mixed.count() == rows
    # other (1000 rows) gives 2250: read over again in its own order, each row 2 or 3 times
    assert set(Counter(i for i in got if source(i)).values()) <= {2, 3}
    # any batch of 100 holds Binomial-like (hypergeometric, less spread) shares: 4 sigma of the binomial
    for b in range(0, rows, 100):
        k = sum(source(i) for i in got[b : b + 100])
        assert within(k, 100 * 0.75, 100 * 0.75 * 0.25), (b, k)
    # the interleave is a pure function of (seed, epoch)
    assert ids(mixed.to_arrow()) == got and ids(mixed.set_epoch(1).to_arrow()) != got


def test_shortest_and_longest(data: dal.Dataset, other: dal.Dataset) -> None:
    shortest = dal.mix([data.scan(), other.scan()], [0.5, 0.5], seed=2)
    got = ids(shortest.to_arrow())
    assert len(got) == 2000 and len(set(got)) == 2000  # until other (1000 rows) runs out: nothing repeats
    assert Counter(map(source, got)) == {0: 1000, 1: 1000}
    longest = dal.mix([data.scan(), other.scan()], [0.5, 0.5], seed=2, stop="longest")
    got = ids(longest.to_arrow())
    assert len(got) == 8000 and Counter(map(source, got)) == {0: 4000, 1: 4000}
    assert set(got) == set(range(4000)) | set(range(100_000, 101_000))


def test_members_keep_projection_filters_samples(data: dal.Dataset, other: dal.Dataset) -> None:
    a = data.scan().select("id", "label").filter("label = 2")
    b = other.scan().select("label", "id").sample(0.5, seed=3, spread=1)
    table = dal.mix([a, b], [1, 1], seed=5, rows=500).to_arrow()
    assert table.column_names == ["id", "label"]
    first = [i for i in ids(table) if not source(i)]
    frame = data.to_pandas()
    assert set(first) <= set(frame[frame.label == 2].id)
    b_rows = set(ids(b.to_arrow()))
    assert {i for i in ids(table) if source(i)} <= b_rows


def test_two_versions_of_one_dataset(sqlite_env: Any, small_chunks: None) -> None:
    dal.write(pa.table({"id": np.arange(300), "v": np.zeros(300)}), "s.versions")
    dal.write(pa.table({"id": np.arange(300, 500), "v": np.ones(200)}), "s.versions", mode="overwrite")
    v0, v1 = dal.open("s.versions", 0), dal.open("s.versions", 1)
    table = dal.mix([v0.scan(), v1.scan()], [2, 1], seed=1).to_arrow()
    got = Counter(table.column("v").to_pylist())
    assert got == {0.0: 300, 1.0: 150}  # shortest: 300/(2/3) = 450 rows


def test_schema_mismatches_are_named(data: dal.Dataset, other: dal.Dataset, tmp_path: Path) -> None:
    with pytest.raises(DalError, match=r"scan 1 \(s.other\) lacks column 'x'"):
        dal.mix([data.scan(), other.scan().select("id", "label")])
    with pytest.raises(DalError, match=r"scan 1 \(s.other\) adds column 'x'"):
        dal.mix([data.scan().select("id", "label"), other.scan()])
    root = tmp_path / "typed"
    root.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "label": [0, 1], "x": [0.5, 1.0]}), root / "a.parquet")
    dal.register("s.typed", str(root), format="parquet")
    with pytest.raises(DalError, match=r"column 'id' is int64 in scan 0 \(s.main\) but int32 in scan 1 \(s.typed\)"):
        dal.mix([data.scan(), dal.open("s.typed").scan()])
    assert dal.mix([data.scan().select("label"), dal.open("s.typed").scan().select("label")]).count() == 4


@pytest.mark.parametrize(
    ("weights", "kwargs", "message"),
    [
        ([1.0], {}, "2 scans but weights 1"),
        ([1.0, -1.0], {}, "must be > 0"),
        ([1.0, 0.0], {}, "must be > 0"),
        ([1.0, "a"], {}, "must be a number"),
        (None, {"stop": "first"}, "stop must be 'shortest' or 'longest'"),
        (None, {"rows": 0}, r"rows must be in \[1, "),
        (None, {"seed": -2}, "seed must be"),
    ],
)
def test_bad_mix_arguments(data: dal.Dataset, other: dal.Dataset, weights: Any, kwargs: Any, message: str) -> None:
    with pytest.raises(DalError, match=message):
        dal.mix([data.scan(), other.scan()], weights, **kwargs)


def test_bad_mix_members(data: dal.Dataset, other: dal.Dataset) -> None:
    with pytest.raises(DalError, match="non-empty list of scans"):
        dal.mix([])
    with pytest.raises(DalError, match="is sharded; shard the mix instead"):
        dal.mix([data.scan().shard(0, 2), other.scan()])
    with pytest.raises(DalError, match="not a dal Scan"):
        dal.mix([data.scan(), 3])
    empty = dal.mix([data.scan().filter("id < 0"), other.scan()])
    with pytest.raises(DalError, match=r"scan 0 \(s.main version 0\) has no rows"):
        empty.count()
    with pytest.raises(DalError, match="has no rows"):
        empty.to_torch(32)  # planned where the loader is made, not mid-training
    assert dal.mix([data, other]).count() == 2000  # datasets stand for their whole scans


def test_argument_errors_come_before_any_read(
    data: dal.Dataset, other: dal.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dal.read.reader

    def no_read(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("read data")

    for name in ("read_task", "read_span", "read_chunks"):
        monkeypatch.setattr(dal.read.reader, name, no_read)
    for bad in (
        lambda: data.scan().sample(2.0),
        lambda: data.scan().balance("nope"),
        lambda: data.scan().balance("label", {0: -1}),
        lambda: dal.mix([data.scan(), other.scan()], [1.0]),
        lambda: dal.mix([data.scan(), other.scan().select("id")]),
    ):
        with pytest.raises(DalError):
            bad()
