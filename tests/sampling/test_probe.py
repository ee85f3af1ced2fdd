"""Adversarial checks of sampling, balance and mixing against independent references (NumPy / pyarrow /
pandas computing the expected rows from the raw data), each written for a bug found by probing."""

from __future__ import annotations

import math
import multiprocessing
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.errors import DalError
from dal.read import reader
from tests.sampling.conftest import ids, within


def _read_spans(query: Any, tasks: list[Any], spans: list[tuple[int, int]], out: Any) -> None:
    out.put([ids(reader.read_span(query, tasks[a:b])) for a, b in spans])


def test_forked_reader_reads_runs_of_row_groups_in_order(data: dal.Dataset) -> None:
    """A forked DataLoader worker plans fragments afresh; pyarrow 26's make_fragment(row_groups=[7, 8, 9])
    reads them as 8, 9, 7, which gave a sampled or mixed scan's workers other rows than the epoch's."""
    query = data.scan().select("id").query
    every = query.all_tasks()
    tasks = [every[i] for i in (1, 2, 3, 7, 8, 9, 12, 13)]
    spans = [(0, 3), (3, 6), (6, 8)]
    here = [ids(reader.read_span(query, tasks[a:b])) for a, b in spans]  # the parent planned (and read) first
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_read_spans, args=(query, tasks, spans, out))
    child.start()
    there = out.get(timeout=60)
    child.join(timeout=60)
    expected = [
        list(range(100 * t.row_group + 1000 * int(t.uri[-9]), 100 * t.row_group + 1000 * int(t.uri[-9]) + 100))
        for t in tasks
    ]
    flat = [[i for t in expected[a:b] for i in t] for a, b in spans]
    assert here == flat and there == flat


# -- datasets with uneven row groups ------------------------------------------------------------------


def uneven(tmp_path: Path, name: str, sizes: list[int]) -> dal.Dataset:
    """One file whose row groups hold ``sizes`` rows (ids 0…N-1 in order)."""
    root = tmp_path / name
    root.mkdir()
    with pq.ParquetWriter(root / "p.parquet", pa.schema([("id", pa.int64())])) as writer:
        start = 0
        for size in sizes:
            writer.write_table(
                pa.table({"id": pa.array(np.arange(start, start + size), pa.int64())}), row_group_size=size
            )
            start += size
    dal.register(f"s.{name}", str(root), format="parquet")
    return dal.open(f"s.{name}")


def test_fraction_is_f_for_every_row_group_size(sqlite_env: Any, tmp_path: Path, small_chunks: None) -> None:
    """Rows of tiny, first, last and large row groups are each in a fraction sample with probability f: the
    hits of every row group over many epochs against I·Binomial(m, f/p)'s mean and variance (NumPy from the
    sizes, not dal); also a dataset of one row group and a filter that leaves 3 rows."""
    sizes = [1, 3, 500, 7, 1, 900, 13, 2]
    f, spread, epochs = 0.2, 4.0, 150
    scan = uneven(tmp_path, "uneven", sizes).scan().sample(f, seed=11, spread=spread)
    hits = np.zeros(sum(sizes))
    for e in range(epochs):
        hits[ids(scan.set_epoch(e).to_arrow())] += 1
    p = min(1.0, max(spread * f, 16 / len(sizes)))  # the documented pick probability (8 groups: all)
    r = f / p
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for g, m in enumerate(sizes):
        var = p * (m * r * (1 - r) + (m * r) ** 2) - (m * f) ** 2  # one epoch's rows of the group
        assert within(hits[bounds[g] : bounds[g + 1]].sum(), epochs * m * f, epochs * var), (g, m)
    one = uneven(tmp_path, "one", [300]).scan().sample(0.3, seed=2)
    counts = [one.set_epoch(e).count() for e in range(40)]
    assert within(sum(counts), 40 * 0.3 * 300, 40 * 300 * 0.3 * 0.7)  # one stage (p = 1): binomial
    few = uneven(tmp_path, "few", [100, 100]).scan().filter("id IN (5, 150, 199)").sample(0.5, seed=3)
    got = [ids(few.set_epoch(e).to_arrow()) for e in range(200)]
    per_row = {i: sum(i in g for g in got) for i in (5, 150, 199)}
    assert set().union(*map(set, got)) <= {5, 150, 199}
    assert all(within(n, 200 * 0.5, 200 * 0.25) for n in per_row.values()), per_row


def test_rows_sample_is_uniform_over_uneven_row_groups(sqlite_env: Any, tmp_path: Path, small_chunks: None) -> None:
    """sample(rows=n): every row's chance is n/N whatever its row group's size. Picking row groups until
    they held spread·n rows favoured rows of small row groups by ~9% here (0.0270 vs 0.0248)."""
    from dal.read import sampling

    sizes = [10, 1000] * 20
    data = uneven(tmp_path, "bias", sizes)
    n, total, epochs = 500, sum(sizes), 3000
    scan = data.scan().sample(rows=n, seed=2)
    tasks = scan.query.all_tasks()
    keys = [sampling._key(t) for t in tasks]
    small = np.zeros(epochs)
    for e in range(epochs):  # the per-row-group counts each epoch (rows inside a group: uniform, below)
        got = sampling._draw_sample(scan.query, scan.sample_, e)
        assert sum(k for _, k in got.values()) == n
        small[e] = sum(got[k][1] for k, m in zip(keys, sizes, strict=True) if m == 10 and k in got)
    rows_small = sum(m for m in sizes if m == 10)
    mean, se = small.mean(), small.std() / np.sqrt(epochs)
    assert abs(mean - n * rows_small / total) <= 4 * se + 1e-9, (mean / rows_small, n / total)
    # and what is read: exactly n distinct rows, the same per (seed, epoch)
    a = ids(scan.set_epoch(4).to_arrow())
    assert len(a) == len(set(a)) == n and a == ids(scan.set_epoch(4).to_arrow())
    hits = np.zeros(total)
    for e in range(60):
        hits[ids(scan.set_epoch(e).to_arrow())] += 1
    assert within(hits.sum(), 60 * n, 0)  # exact


# -- balance: class columns ------------------------------------------------------------------------------


@pytest.fixture
def classes(sqlite_env: Any, tmp_path: Path, small_chunks: None) -> dal.Dataset:
    """1000 rows in row groups of 64: a string label with nulls, a bool, a float with NaN and -0.0, a list."""
    i = np.arange(1000)
    label = [None if k % 7 == 0 else ("a" if k % 3 else "b") for k in i]
    f = np.where(i % 11 == 0, np.nan, (i % 3).astype(np.float64))
    f[i % 5 == 0] = -0.0  # -0.0 and 0.0 (i % 3 == 0 elsewhere) are one class
    table = pa.table(
        {
            "id": pa.array(i, pa.int64()),
            "label": pa.array(label, pa.string()),
            "flag": pa.array(i % 4 == 0),
            "f": pa.array(f),
            "vec": pa.array([[float(k), 1.0] for k in i], pa.list_(pa.float64())),
        }
    )
    root = tmp_path / "classes"
    root.mkdir()
    pq.write_table(table, root / "p.parquet", row_group_size=64)
    dal.register("s.classes", str(root), format="parquet")
    return dal.open("s.classes")


def class_of(value: Any) -> Any:
    return (
        "nan"
        if isinstance(value, float) and value != value
        else (None if value is None else value + 0.0 if isinstance(value, float) else value)
    )


def test_float_classes_with_nan_and_negative_zero(classes: dal.Dataset) -> None:
    """NaN is one class (each row group's NaN was its own class: a uniform balance drew 48 NaN rows and 3
    of each real class), -0.0 is 0.0; exact counts against pandas."""
    frame = classes.to_pandas()
    sizes = frame.f.map(class_of).value_counts(dropna=False)
    k = int(sizes.min())
    for seed in range(3):
        got = classes.scan().balance("f", seed=seed).to_pandas()
        counts = got.f.map(class_of).value_counts(dropna=False)
        assert set(map(str, counts.index)) == set(map(str, sizes.index)) and set(counts) == {k}, counts
        assert set(got.id) <= set(frame.id) and got.id.is_unique
    # a weight for NaN (any NaN object), none for 2.0
    got = classes.scan().balance("f", {float("nan"): 1, 0.0: 1, 1.0: 2}, rows=280, seed=1).to_pandas()
    assert got.f.map(class_of).value_counts().to_dict() == {"nan": 70, 0.0: 70, 1.0: 140}


def test_nulls_bool_and_string_classes(classes: dal.Dataset) -> None:
    """A null label is its own class (documented); bool and string classes; exact counts against pandas."""
    frame = classes.to_pandas()
    per = frame.label.value_counts(dropna=False)
    got = classes.scan().balance("label", seed=1).to_pandas()
    assert got.label.value_counts(dropna=False).to_dict() == dict.fromkeys(per.index, int(per.min()))
    got = classes.scan().balance("label", {None: 1, "b": 3}, rows=200, seed=1).to_pandas()
    assert got.label.value_counts(dropna=False).to_dict() == {None: 50, "b": 150}
    assert set(got.id) <= set(frame[frame.label.isna() | (frame.label == "b")].id)
    got = classes.scan().balance("flag", {True: 1, False: 2}, seed=4).to_pandas()
    assert got.flag.value_counts().to_dict() == {True: 250, False: 500}  # the scarcest allows 250 / 1


@pytest.mark.parametrize(
    ("by", "weights", "message"),
    [
        ("vec", "uniform", "column holds no classes"),
        ("label", {0: 1}, "class 0 is not a value of 'label'"),
        ("flag", {1: 1}, "class 1 is not a value of 'flag'"),
        ("id", {True: 1}, "class True is not a value of 'id'"),
        ("id", {0.5: 1}, "class 0.5 is not a value of 'id'"),
        ("id", {2**70: 1}, "is not a value of 'id'"),
    ],
)
def test_balance_columns_and_weight_keys_are_checked_before_any_read(
    classes: dal.Dataset, monkeypatch: pytest.MonkeyPatch, by: str, weights: Any, message: str
) -> None:
    def no_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read before the arguments were checked")

    monkeypatch.setattr(reader, "read_task", no_read)
    monkeypatch.setattr(reader, "read_span", no_read)
    with pytest.raises(DalError, match=re.escape(message)):
        classes.scan().balance(by, weights)


def test_balance_by_a_tensor_field_is_refused(sqlite_env: Any) -> None:
    schema = TensorSchema(
        "T",
        [TensorField("id", np.int64, (), ScalarCodec()), TensorField("arr", np.float32, (2,), NdarrayCodec())],
    )
    dal.write(
        {"id": np.arange(10), "arr": list(np.zeros((10, 2), np.float32))},
        "s.tensors",
        format="petastorm",
        schema=schema,
    )
    with pytest.raises(DalError, match="tensor field"):
        dal.open("s.tensors").scan().balance("arr")


def test_partition_column_classes_on_delta(sqlite_env: Any, small_chunks: None) -> None:
    """Balance by a Delta partition column: exact counts (pandas); a weight for a class that only a filtered
    out partition holds is an error naming the values there are."""
    i = np.arange(2000)
    dal.write(
        pa.table({"id": i, "part": np.where(i % 5 == 0, "rare", "common"), "x": i % 3}),
        "s.parts",
        partition_by=["part"],
    )
    scan = dal.open("s.parts").scan()
    got = scan.balance("part", seed=1).to_pandas()
    assert got.part.value_counts().to_dict() == {"rare": 400, "common": 400}
    assert set(got[got.part == "rare"].id) == set(i[i % 5 == 0])  # the scarcest class whole
    got = scan.filter("x = 1").balance("part", {"rare": 1, "common": 1}, rows=100, seed=2).to_pandas()
    assert got.part.value_counts().to_dict() == {"rare": 50, "common": 50} and set(got.x) == {1}
    with pytest.raises(DalError, match=r"weights name 'common', not a value .*its values: 'rare'"):
        scan.filter("part = 'rare'").balance("part", {"rare": 1, "common": 1}).count()


# -- hostile arguments and mixes --------------------------------------------------------------------------


def test_huge_rows_are_dal_errors_before_any_read(
    data: dal.Dataset, other: dal.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rows=10**30 was an OverflowError, mix(rows=2**40) numpy's ValueError (and a loop over 2**40 rows)."""

    def no_read(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("read before the arguments were checked")

    monkeypatch.setattr(reader, "read_task", no_read)
    monkeypatch.setattr(reader, "read_span", no_read)
    scan = data.scan()
    with pytest.raises(DalError, match="sample rows must be in"):
        scan.sample(rows=10**30, replace=True)
    with pytest.raises(DalError, match="balance rows must be in"):
        scan.balance("label", rows=10**30, replace=True)
    with pytest.raises(DalError, match="mix rows must be in"):
        dal.mix([scan, other.scan()], rows=2**40)
    with pytest.raises(DalError, match="rows=10 sets the epoch's length"):
        dal.mix([scan, other.scan()], rows=10, stop="longest")


def test_draws_beyond_numpys_exact_limit_are_dal_errors(
    data: dal.Dataset, other: dal.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy's multivariate hypergeometric takes fewer than 10**9 rows (a ValueError beyond): the limit
    lowered to 1500 rows here stands for a billion-row dataset."""
    from dal.read import sampling

    monkeypatch.setattr(sampling, "MAX_DRAW", 1500)
    with pytest.raises(DalError, match="exact draw among 2,800 rows is not supported"):
        data.scan().balance("label", rows=10).count()  # class 0: 2800 rows
    assert data.scan().balance("label", rows=10, replace=True).count() == 10
    with pytest.raises(DalError, match="exact draw among 4,000 rows"):
        data.scan().sample(rows=10, spread=math.inf).count()
    assert len(ids(data.scan().sample(rows=10, seed=1).to_arrow())) == 10  # a window of 40 rows
    with pytest.raises(DalError, match="an epoch of 8,000 rows.*at most 1,500"):
        dal.mix([data.scan(), other.scan()], stop="longest").count()


def test_mix_weights_as_numpy_and_unnormalised(data: dal.Dataset, other: dal.Dataset, tmp_path: Path) -> None:
    third = uneven(tmp_path, "third", [50, 50, 50])
    scans = [data.scan().select("id"), other.scan().select("id"), third.scan().select("id")]
    weights = np.array([2.0, 3.0, 5.0])
    a = dal.mix(scans, weights, seed=3, rows=1000)
    assert ids(a.to_arrow()) == ids(dal.mix(scans, [0.2, 0.3, 0.5], seed=3, rows=1000).to_arrow())
    sizes = [4000, 1000, 150]
    for stop in ("shortest", "longest"):
        mixed = dal.mix(scans, [2, 3, 5], seed=4, stop=stop)
        epoch = mixed.epoch_rows()
        total, n = epoch.total, epoch.counts
        assert sum(n) == total == mixed.count() == len(ids(mixed.to_arrow()))
        assert all(abs(k - w / 10 * total) < 1 for k, w in zip(n, [2, 3, 5], strict=True)), n
        if stop == "shortest":  # third (150 rows at 0.5) runs out first: 300 rows, nothing repeated
            assert n == [60, 90, 150]
        else:  # data (4000 rows at 0.2) runs out last: 20000 rows, data read once
            assert n == [4000, 6000, 10000] and total == 20000
        assert all(k <= s for k, s in zip(n, sizes, strict=True)) or stop == "longest"


def test_mix_of_a_nullable_and_a_non_nullable_column(sqlite_env: Any, tmp_path: Path) -> None:
    """The mixed schema said 'not null' (the first scan's field) while holding the second scan's nulls."""
    for name, nullable, values in [("nn", False, [1, 2, 3]), ("wn", True, [None, 5, 6])]:
        root = tmp_path / name
        root.mkdir()
        schema = pa.schema([pa.field("v", pa.int64(), nullable=nullable)])
        pq.write_table(pa.table({"v": pa.array(values, pa.int64())}, schema=schema), root / "p.parquet")
        dal.register(f"s.{name}", str(root), format="parquet")
    mixed = dal.mix([dal.open("s.nn").scan(), dal.open("s.wn").scan()], rows=6, seed=1)
    table = mixed.to_arrow()
    assert table.schema.field("v").nullable and mixed.schema().field("v").nullable
    assert sorted(table.column("v").to_pylist(), key=lambda v: (v is not None, v)) == [None, 1, 2, 3, 5, 6]


# -- composition --------------------------------------------------------------------------------------------


def test_sample_and_filter_commute_and_epochs_differ(data: dal.Dataset, other: dal.Dataset) -> None:
    """Filters apply before the draw whatever the call order (the sample is of the filtered rows); a shuffle
    reorders the same sample; iter_batches(num_epochs=3) reads three different samples."""
    frame = data.to_pandas()
    a = data.scan().sample(0.4, seed=1).filter("label = 0")
    b = data.scan().filter("label = 0").sample(0.4, seed=1)
    got = ids(a.to_arrow())
    assert got == ids(b.to_arrow()) and set(got) <= set(frame[frame.label == 0].id)
    shuffled = ids(data.scan().filter("label = 0").shuffle(seed=9).sample(0.4, seed=1).to_arrow())
    assert sorted(shuffled) == sorted(got) and shuffled != got
    scan = data.scan().select("id").sample(0.1, seed=2)
    epochs = [ids(scan.set_epoch(e).to_arrow()) for e in range(3)]
    batches = [i for b in scan.iter_batches(50_000, num_epochs=3) for i in b.column("id").to_pylist()]
    assert batches == epochs[0] + epochs[1] + epochs[2] and len({tuple(e) for e in epochs}) == 3
    mixed = dal.mix([data.scan().select("id").sample(0.2, seed=1), other.scan().select("id").sample(0.5)], seed=3)
    epochs = [ids(mixed.set_epoch(e).to_arrow()) for e in range(3)]
    batches = [i for b in mixed.iter_batches(50_000, num_epochs=3) for i in b.column("id").to_pylist()]
    assert batches == epochs[0] + epochs[1] + epochs[2] and len({tuple(e) for e in epochs}) == 3


def test_states_of_other_selections_are_refused(data: dal.Dataset, other: dal.Dataset) -> None:
    pytest.importorskip("torch")
    scan = data.scan().select("id", "label")
    state = scan.balance("label", seed=1).to_torch(32).state_dict()
    for changed in (
        scan.balance("label", seed=2),
        scan.balance("label", {0: 1, 1: 1}, seed=1),
        scan.sample(0.5, seed=1),
        scan,
    ):
        with pytest.raises(DalError, match="cannot resume"):
            changed.to_torch(32).load_state_dict(state)
    members = [scan.sample(0.5, seed=1), other.scan().select("id", "label")]
    state = dal.mix(members, seed=1, rows=100).to_torch(32).state_dict()
    for changed_mix in (
        dal.mix([scan.sample(0.5, seed=2), members[1]], seed=1, rows=100),
        dal.mix(members, seed=1, rows=101),
        dal.mix(members, seed=1),
        dal.mix(members[::-1], seed=1, rows=100),
    ):
        with pytest.raises(DalError, match="cannot resume"):
            changed_mix.to_torch(32).load_state_dict(state)


def test_too_many_classes_over_all_row_groups(data: dal.Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each row group under the class limit but the scan over it (an id column) was drawn class by class
    (classes x row groups of work); a DalError now."""
    from dal.read import sampling

    monkeypatch.setattr(sampling, "MAX_CLASSES", 150)  # row groups of 100 distinct ids, 4000 in all
    with pytest.raises(DalError, match="4000 distinct values"):
        data.scan().balance("id").count()
    assert data.scan().balance("label").count() == 1200  # 3 classes: 400 each (the scarcest)


def test_partitioned_petastorm_sample_and_balance(sqlite_env: Any, small_chunks: None) -> None:
    """A Petastorm dataset partitioned by a string field: each row in a fraction sample with probability f
    (hits per partition within the two-stage variance, computed here from the sizes), and balance by the
    partition field exact."""
    schema = TensorSchema(
        "P",
        [
            TensorField("id", np.int64, (), ScalarCodec()),
            TensorField("part", np.str_, (), ScalarCodec()),
            TensorField("arr", np.float32, (2,), NdarrayCodec()),
        ],
    )
    n = 600
    i = np.arange(n)
    part = np.where(i % 3 == 0, "a", "b")
    arrays = list(np.stack([i, -i], axis=1).astype(np.float32))
    dal.write({"id": i, "part": part, "arr": arrays}, "s.pp", format="petastorm", schema=schema, partition_by=["part"])
    scan = dal.open("s.pp").scan()
    f, spread, epochs = 0.2, 4.0, 100
    p = min(1.0, max(spread * f, 16 / 2))  # two row groups (one per partition): both picked
    r = f / p
    sample = scan.select("id", "part").sample(f, seed=1, spread=spread)
    hits = np.zeros(n)
    for e in range(epochs):
        hits[ids(sample.set_epoch(e).to_arrow())] += 1
    for value in ("a", "b"):
        m = int((part == value).sum())  # one row group per partition here
        var = p * (m * r * (1 - r) + (m * r) ** 2) - (m * f) ** 2
        assert within(hits[part == value].sum(), epochs * m * f, epochs * var), value
    got = scan.balance("part", seed=2).to_numpy()
    assert sorted(zip(*np.unique(got["part"], return_counts=True), strict=True)) == [("a", 200), ("b", 200)]
    assert np.array_equal(got["arr"][:, 0], got["id"].astype(np.float32))  # tensor rows stay with their ids


def test_samples_of_a_delta_table_with_deletion_vectors(sqlite_env: Any, tmp_path: Path) -> None:
    """Deleted rows never come back in a sample, a balance or a mix (delta-rs's own reader is the reference)."""
    import shutil

    from deltalake import DeltaTable, QueryBuilder

    from tests.conformance.conftest import require_corpus

    shutil.copytree(require_corpus() / "delta-rs" / "table-with-dv-small", tmp_path / "dv")
    reference = QueryBuilder().register("t", DeltaTable(str(tmp_path / "dv"))).execute("select value from t")
    live = set(pa.table(reference.read_all()).column("value").to_pylist())
    dal.register("t.dv", str(tmp_path / "dv"))
    scan = dal.open("t.dv").scan()
    seen: set[int] = set()
    for e in range(20):
        got = scan.sample(0.5, seed=3).set_epoch(e).to_arrow().column("value").to_pylist()
        assert set(got) <= live and len(got) == len(set(got))
        seen |= set(got)
    assert seen == live
    assert sorted(scan.sample(rows=len(live), seed=1).to_arrow().column("value").to_pylist()) == sorted(live)
    assert sorted(scan.balance("value", rows=len(live)).to_arrow().column("value").to_pylist()) == sorted(live)
    assert set(dal.mix([scan, scan.sample(0.5)], rows=40).to_arrow().column("value").to_pylist()) <= live


@pytest.mark.parametrize("weights", [[1e308, 1e308], [1e-320, 1.0], [1.0, 1e-12]])
def test_extreme_but_finite_mix_weights(data: dal.Dataset, other: dal.Dataset, weights: list[float]) -> None:
    """1e308 + 1e308 overflowed to inf (a ZeroDivisionError), 4000 / 1e-320 to an OverflowError: now
    counts, or a DalError for a 'longest' epoch beyond any size."""
    scans = [data.scan(), other.scan()]
    assert dal.mix(scans, weights, rows=10).count() == 10
    shortest = dal.mix(scans, weights).epoch_rows().counts
    share = weights[0] / (weights[0] + weights[1]) if weights[0] < 1e300 else 0.5
    assert abs(shortest[0] - share * sum(shortest)) < 1
    if weights[0] == weights[1]:
        assert dal.mix(scans, weights, stop="longest").count() == 8000
    else:
        with pytest.raises(DalError, match="stop='longest' makes an epoch of"):
            dal.mix(scans, weights, stop="longest").count()


def test_extreme_but_finite_balance_weights(data: dal.Dataset) -> None:
    """{0: 1e308, 1: 1e308} summed to inf (an OverflowError from the class shares)."""
    got = data.scan().balance("label", {0: 1e308, 1: 1e308}, seed=1).to_pandas()
    assert got.label.value_counts().to_dict() == {0: 800, 1: 800}  # class 1 has 800 rows
    got = data.scan().balance("label", {0: 1e-320, 1: 1.0}, rows=100, seed=1).to_pandas()
    assert got.label.value_counts().to_dict() == {1: 100}


@pytest.mark.parametrize("kind", ["sample", "mix"])
def test_stateful_dataloader_with_workers_resumes_a_sample_or_mix(
    data: dal.Dataset, other: dal.Dataset, kind: str
) -> None:
    """torchdata's StatefulDataLoader keeps one state per plain DataLoader worker: a sampled scan or a mix
    resumed there was a DalError in the worker; now each worker skips the rows of its share it gave."""
    pytest.importorskip("torch")
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    from tests.sampling.test_feed import batch_ids, sources

    src = sources(data, other)[kind].shard(1, 2)

    def loader() -> Any:
        return stateful.StatefulDataLoader(src.to_torch(32), batch_size=None, num_workers=2)

    full = batch_ids(loader())
    first = loader()
    it = iter(first)
    head = [next(it) for _ in range(5)]
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = batch_ids(resumed)
    assert batch_ids(head) + rest == full
