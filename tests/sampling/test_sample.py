"""Scan.sample: per-epoch samples with exact inclusion probability, row-group pushdown, determinism."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dal
import dal.read.plan
import dal.read.reader
from dal.errors import DalError, FilterError
from tests.sampling.conftest import GROUP, ROWS, ids, within

REPO = Path(__file__).resolve().parents[2]


def pick(f: float, spread: float, groups: int) -> float:
    """The documented row-group pick probability: spread·f, raised so 16 row groups are picked on average."""
    return min(1.0, max(spread * f, 16 / groups))


def two_stage(ns: list[int], f: float, spread: float) -> tuple[float, float]:
    """Mean and variance of the sampled row count: row group g (n rows) picked with p = pick(f, spread, G),
    then each of its rows with r = f/p (independently): X_g = I_g · Binomial(n, r)."""
    p = pick(f, spread, len(ns))
    r = f / p
    mean = f * sum(ns)
    var = sum(p * (n * r * (1 - r) + (n * r) ** 2) - (n * f) ** 2 for n in ns)
    return mean, var


@pytest.mark.parametrize(("fraction", "spread"), [(0.05, 4.0), (0.3, 4.0), (0.1, math.inf)])
def test_fraction_counts_follow_the_two_stage_variance(data: dal.Dataset, fraction: float, spread: float) -> None:
    scan = data.scan().sample(fraction, seed=3, spread=spread)
    epochs = 12
    counts = [scan.set_epoch(e).count() for e in range(epochs)]
    mean, var = two_stage([GROUP] * (ROWS // GROUP), fraction, spread)
    if math.isinf(spread):
        assert var == pytest.approx(ROWS * fraction * (1 - fraction))  # one stage: binomial
    assert all(within(c, mean, var) for c in counts), (counts, mean, var)
    assert within(sum(counts), epochs * mean, epochs * var)
    assert len(set(counts)) > 1  # a different sample each epoch
    # what is read is what was counted, and a subset of the data without repeats
    got = ids(scan.set_epoch(1).to_arrow())
    assert len(got) == counts[1] and len(set(got)) == len(got) and set(got) <= set(range(ROWS))


def test_sample_of_a_filtered_scan_against_pandas(data: dal.Dataset) -> None:
    frame = data.to_pandas()
    wanted = set(frame[(frame.label == 0) & (frame.x >= 100)].id)
    scan = data.scan().filter("label = 0 AND x >= 100").sample(0.2, seed=5, spread=2)
    got = ids(scan.to_arrow())
    assert set(got) <= wanted and len(set(got)) == len(got)
    per_group = frame[(frame.label == 0) & (frame.x >= 100)].groupby(frame.id // GROUP).size().tolist()
    mean, var = two_stage(per_group, 0.2, 2)
    assert within(len(got), mean, var)


def test_marginal_inclusion_is_the_fraction_for_every_row(data: dal.Dataset) -> None:
    """Over many epochs each row is in the sample with probability f: the first and the last thousand rows
    are drawn alike (their totals within the variance), whatever the row groups picked."""
    f, epochs = 0.1, 30
    scan = data.scan().select("id").sample(f, seed=9)
    hits = np.zeros(ROWS)
    for e in range(epochs):
        hits[ids(scan.set_epoch(e).to_arrow())] += 1
    _, var_epoch = two_stage([GROUP] * 10, f, 4.0)  # 1000 rows = 10 row groups
    for part in (hits[:1000], hits[-1000:]):
        assert within(part.sum(), epochs * 1000 * f, epochs * var_epoch)


def test_rows_gives_exactly_that_many(data: dal.Dataset) -> None:
    scan = data.scan().sample(rows=123, seed=1)
    a, b = ids(scan.to_arrow()), ids(scan.set_epoch(1).to_arrow())
    assert len(a) == len(b) == 123 == scan.count() and len(set(a)) == 123 and a != b
    with_replacement = data.scan().sample(rows=2 * ROWS, seed=1, replace=True)
    got = ids(with_replacement.to_arrow())
    assert len(got) == 2 * ROWS and len(set(got)) < len(got)
    with pytest.raises(DalError, match="only 4000 rows"):
        data.scan().sample(rows=ROWS + 1, seed=1, spread=math.inf).count()


def test_replace_with_a_fraction_draws_poisson_copies(data: dal.Dataset) -> None:
    f = 0.2
    got = ids(data.scan().sample(f, seed=4, replace=True, spread=math.inf).to_arrow())
    # Poisson(f) copies of each row: mean and variance N·f
    assert within(len(got), ROWS * f, ROWS * f) and len(set(got)) < len(got)


def test_pushdown_reads_only_the_picked_row_groups(data: dal.Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    read_groups: set[tuple[str, int]] = set()
    real = dal.read.plan.Query.fragment

    def spy(query: Any, task: Any, row_groups: Any = None) -> Any:  # every read makes its fragments here
        read_groups.update((task.uri, g) for g in (row_groups if row_groups is not None else [task.row_group]))
        return real(query, task, row_groups)

    monkeypatch.setattr(dal.read.plan.Query, "fragment", spy)
    f, spread, groups = 0.02, 4.0, ROWS // GROUP
    scan = data.scan().sample(f, seed=2, spread=spread)
    table = scan.to_arrow()
    planned = scan.plan()
    assert read_groups == {(t.uri, t.row_group) for t in planned}
    p = pick(f, spread, groups)  # row groups are picked with probability p: their number is Binomial(groups, p)
    assert within(len(planned), groups * p, groups * p * (1 - p))
    assert len(planned) < groups * 0.7  # 40 row groups: about 16 picked (p raised from spread·f = 0.08)
    assert table.num_rows and scan.bytes_planned() < data.scan().bytes_planned() * 0.7


def test_few_row_groups_give_steady_epochs(sqlite_env: Any) -> None:
    """One row group (a pandas write of 20,000 rows): a 1% sample has about 200 rows every epoch, a binomial
    count. Picking row groups with probability spread·f alone gave 0 rows in ~96% of epochs, all 5,000 of a
    4% pick in the others."""
    n, f = 20_000, 0.01
    dal.write(pd.DataFrame({"id": np.arange(n)}), "s.one")
    scan = dal.open("s.one").scan().sample(f, seed=1)
    counts = [scan.set_epoch(e).count() for e in range(20)]
    assert all(within(c, n * f, n * f * (1 - f)) for c in counts), counts


def test_same_sample_and_mix_in_another_process(data: dal.Dataset, other: dal.Dataset) -> None:
    scan = data.scan().sample(0.1, seed=21).shuffle(seed=4).set_epoch(2)
    mixed = dal.mix([data.scan().balance("label", seed=2), other.scan()], [0.7, 0.3], seed=8).set_epoch(3)
    mine = [ids(scan.to_arrow()), ids(mixed.to_arrow())]
    code = (
        "import dal, json, dal.read.reader as r; r.MIN_CHUNK_ROWS = 100; r.CHUNK_BYTES = 1; "
        "s = dal.open('s.main').scan().sample(0.1, seed=21).shuffle(seed=4).set_epoch(2); "
        "m = dal.mix([dal.open('s.main').scan().balance('label', seed=2), dal.open('s.other').scan()], [0.7, 0.3], "
        "seed=8).set_epoch(3); "
        "print(json.dumps([[int(i) for i in x.to_arrow()['id'].to_pylist()] for x in (s, m)]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "99"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == mine
    assert mine[0] != sorted(mine[0])  # shuffled: rows permuted inside chunks


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fraction": 0.0}, r"fraction must be in \(0, 1\]"),
        ({"fraction": 1.5}, r"fraction must be in \(0, 1\]"),
        ({"fraction": -0.1}, r"fraction must be in \(0, 1\]"),
        ({"fraction": float("nan")}, "must be finite"),
        ({"fraction": True}, "must be a number"),
        ({"rows": 0}, r"rows must be in \[1, "),
        ({"rows": 2.5}, "must be an integer"),
        ({}, "exactly one of fraction= or rows="),
        ({"fraction": 0.1, "rows": 3}, "exactly one of fraction= or rows="),
        ({"fraction": 0.1, "spread": 0.5}, "spread must be >= 1"),
        ({"fraction": 0.1, "seed": -1}, "seed must be"),
        ({"fraction": 0.1, "replace": "yes"}, "replace must be True or False"),
    ],
)
def test_bad_sample_arguments(data: dal.Dataset, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DalError, match=message):
        data.scan().sample(**kwargs)


def test_sample_once_and_empty_scans(data: dal.Dataset) -> None:
    with pytest.raises(DalError, match="already sampled"):
        data.scan().sample(0.5).sample(0.5)
    empty = data.scan().filter("id < 0")
    assert empty.sample(0.5).count() == 0 and empty.sample(0.5).to_arrow().num_rows == 0
    with pytest.raises(DalError, match="no rows to sample"):
        empty.sample(rows=3).count()


@pytest.fixture
def days(sqlite_env: Any, tmp_path: Path) -> dal.Dataset:
    """Ten days, one file each, in two row groups of 1,000 rows: row groups larger than a sample's window."""
    root = tmp_path / "days"
    for d in range(10):
        (root / f"day={d}").mkdir(parents=True)
        ids_ = np.arange(d * 2000, (d + 1) * 2000)
        pq_table = pd.DataFrame({"id": ids_, "x": ids_ / 2})
        pq_table.to_parquet(root / f"day={d}" / "part.parquet", row_group_size=1000, index=False)
    dal.register("s.days", str(root), format="parquet")
    return dal.open("s.days")


def test_rows_sample_draws_each_epoch_from_all_over_the_scan(days: dal.Dataset) -> None:
    """sample(rows=3000) of ten days drew each epoch's rows from one window of spread·n rows: 1-2 of the 10 days.
    The draw now covers its spread·n rows with 16 windows spread over the row groups (in a new random order each
    epoch): most days every epoch, at the I/O of about 16 row groups. windows=1 is the old, cheapest draw."""
    n = 300
    spread = days.scan().sample(rows=n, seed=5)
    clustered = days.scan().sample(rows=n, seed=5, windows=1)
    for e in range(8):
        got = np.asarray(ids(spread.set_epoch(e).to_arrow()))
        assert len(got) == len(set(got.tolist())) == n
        assert len(set((got // 2000).tolist())) >= 6, e  # 16 windows over 20 row groups of 10 days
        one = np.asarray(ids(clustered.set_epoch(e).to_arrow()))
        assert len(one) == n and len(set((one // 2000).tolist())) <= 3  # 1,200 rows: at most 3 row groups
        assert len(clustered.set_epoch(e).plan()) <= 3
    with pytest.raises(FilterError, match="windows= applies to rows="):
        days.scan().sample(0.1, windows=3)
    with pytest.raises(FilterError, match="sample windows must be"):
        days.scan().sample(rows=10, windows=0)


def test_rows_sample_keeps_every_rows_chance_with_several_windows(sqlite_env: Any, tmp_path: Path) -> None:
    """With 16 windows each row's chance is still exactly n/N: per-day totals over many epochs match n/10, for
    days of unequal sizes and row groups (the per-row-group counts of the draw, exact per epoch)."""
    from dal.read import sampling

    root = tmp_path / "uneven"
    sizes = [300, 1700, 900, 2600, 500]
    for d, size in enumerate(sizes):
        (root / f"day={d}").mkdir(parents=True)
        start = sum(sizes[:d])
        frame = pd.DataFrame({"id": np.arange(start, start + size)})
        frame.to_parquet(root / f"day={d}" / "part.parquet", row_group_size=[200, 700, 450, 650, 125][d], index=False)
    dal.register("s.uneven", str(root), format="parquet")
    scan = dal.open("s.uneven").scan().sample(rows=400, seed=3)
    tasks = scan.query.all_tasks()
    day_of = [int(dict(t.partition_values)["day"]) for t in tasks]
    epochs, total = 1500, sum(sizes)
    per_day = np.zeros((epochs, len(sizes)))
    for e in range(epochs):
        got = sampling._draw_sample(scan.query, scan.sample_, e)
        assert sum(k for _, k in got.values()) == 400
        for t, d in zip(tasks, day_of, strict=True):
            per_day[e, d] += got.get(sampling._key(t), (0, 0))[1]
    for d, size in enumerate(sizes):
        mean, se = per_day[:, d].mean(), per_day[:, d].std() / np.sqrt(epochs)
        assert abs(mean - 400 * size / total) <= 4 * se + 1e-9, (d, mean, 400 * size / total)
