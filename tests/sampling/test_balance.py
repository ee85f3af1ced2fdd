"""Scan.balance: class-balanced draws per epoch from per (row group, class) counts made once per version."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

import dal
import dal.read.reader
from dal.errors import DalError
from dal.read.sampling import apportion
from tests.sampling.conftest import ROWS, ids, within

CLASS_ROWS = {0: 2800, 1: 800, 2: 400}  # LABELS over 4000 ids


def labels(table: Any) -> Counter[int]:
    return Counter(int(v) for v in table.column("label").to_pylist())


def test_uniform_without_replacement_is_limited_by_the_scarcest_class(data: dal.Dataset) -> None:
    frame = data.to_pandas()
    assert frame.label.value_counts().to_dict() == CLASS_ROWS  # the reference the counts below rely on
    scan = data.scan().balance("label", seed=1)
    table = scan.to_arrow()
    assert labels(table) == {0: 400, 1: 400, 2: 400} and scan.count() == 1200
    got = ids(table)
    assert len(set(got)) == len(got)
    truth = dict(zip(frame.id, frame.label, strict=True))
    assert all(truth[i] == lab for i, lab in zip(got, table.column("label").to_pylist(), strict=True))
    other = ids(scan.set_epoch(1).to_arrow())
    assert set(other) != set(got) and Counter(truth[i] for i in other) == {0: 400, 1: 400, 2: 400}


def test_weights_with_replacement_and_rows(data: dal.Dataset) -> None:
    weights = {0: 1.0, 1: 1.0, 2: 2.0}
    rows = 6000
    scan = data.scan().select("id", "x").balance("label", weights, rows=rows, seed=2, replace=True)
    table = scan.shuffle(seed=3).to_arrow()
    assert table.column_names == ["id", "x"]  # `by` read for the draw, not returned
    frame = data.to_pandas().set_index("id")
    got = frame.loc[ids(table)].label.to_numpy()
    want = dict(zip([0, 1, 2], apportion(rows, [1, 1, 2]), strict=True))
    assert Counter(got.tolist()) == want  # exact per-epoch counts, known before reading
    # with replacement: class 2 (400 rows, 3000 draws) repeats; each of its rows is drawn ~ 7.5 times
    twos = Counter(i for i, lab in zip(ids(table), got, strict=True) if lab == 2)
    assert len(twos) <= CLASS_ROWS[2] and max(twos.values()) > 1
    # balanced in every part of the (shuffled) epoch: the first 1000 rows hold ~1/2 of class 2
    head = got[:1000]
    p = want[2] / rows
    assert within(int((head == 2).sum()), 1000 * p, 1000 * p * (1 - p))


def test_filtered_balance_against_pandas(data: dal.Dataset) -> None:
    frame = data.to_pandas()
    kept = frame[frame.x < 1000]  # ids < 2000
    scan = data.scan().filter("x < 1000").balance("label", {1: 1, 2: 1}, seed=4)
    table = scan.to_arrow()
    n = int(kept.label.value_counts()[2])  # the scarcer of the two
    assert labels(table) == {1: n, 2: n}
    assert set(ids(table)) <= set(kept[kept.label.isin([1, 2])].id)


def test_the_counting_pass_reads_only_the_class_column_once(data: dal.Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    columns_read: list[tuple[str, ...] | None] = []
    real = dal.read.reader.read_task

    def spy(query: Any, task: Any) -> Any:
        columns_read.append(query.columns)
        return real(query, task)

    monkeypatch.setattr(dal.read.reader, "read_task", spy)
    scan = data.scan().select("x").balance("label", seed=1)
    assert scan.count() == 1200
    assert columns_read and set(columns_read) == {("label",)}  # counting: the class column only
    n = len(columns_read)
    assert scan.set_epoch(5).count() == 1200 and len(columns_read) == n  # cached per version
    scan.to_arrow()
    assert set(columns_read[n:]) == {("x", "label")}  # reading: projection + class column


def test_balanced_frequencies_across_epochs(data: dal.Dataset) -> None:
    """Without replacement, class 0's rows are drawn uniformly: over epochs, every row of class 0 is in the
    sample with probability 400/2800 — the first and second half of class 0's rows alike."""
    frame = data.to_pandas()
    zeros = np.sort(frame[frame.label == 0].id.to_numpy())
    hits = Counter[int]()
    epochs = 10
    scan = data.scan().select("id").balance("label", seed=8)
    for e in range(epochs):
        hits.update(ids(scan.set_epoch(e).to_arrow()))
    p = 400 / 2800
    for half in (zeros[:1400], zeros[1400:]):
        total = sum(hits[int(i)] for i in half)
        assert within(total, epochs * len(half) * p, epochs * len(half) * p * (1 - p))


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("nope",), {}, "unknown column 'nope' in balance"),
        (("label", {0: -1.0, 1: 2}), {}, "negative"),
        (("label", {0: 0, 1: 0}), {}, "all zero"),
        (("label", {}), {}, "non-empty dict"),
        (("label", "skewed"), {}, "'uniform' or a non-empty dict"),
        (("label", {0: "a"}), {}, "must be a number"),
        (("label",), {"rows": 0}, r"rows must be in \[1, "),
    ],
)
def test_bad_balance_arguments(data: dal.Dataset, args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DalError, match=message):
        data.scan().balance(*args, **kwargs)


def test_weights_naming_absent_classes_and_too_many_rows(data: dal.Dataset) -> None:
    with pytest.raises(DalError, match=r"weights name 7, not a value of the column .*its values: 0, 1, 2"):
        data.scan().balance("label", {0: 1, 7: 1}).count()
    with pytest.raises(DalError, match="class 1 needs 1000 rows but has 800"):
        data.scan().balance("label", rows=3000).count()
    with pytest.raises(DalError, match="no rows"):
        data.scan().filter("id < 0").balance("label").count()
    assert ROWS == sum(CLASS_ROWS.values())
