"""``multiset_difference``: the rows a diff unit reports, checked against a Counter of Python rows."""

from __future__ import annotations

import random
from collections import Counter

import pyarrow as pa

from dal.read.changes import multiset_difference
from tests.changes.helpers import rows


def test_duplicates_nulls_nans_and_nested_values_cancel_exactly() -> None:
    schema = pa.schema([("a", pa.int64()), ("f", pa.float64()), ("s", pa.string()), ("l", pa.list_(pa.int32())),
                        ("st", pa.struct([("k", pa.int8())])), ("d", pa.dictionary(pa.int8(), pa.string()))])  # fmt: skip
    rng = random.Random(5)

    def table(n: int) -> pa.Table:
        data = [
            {
                "a": rng.choice([1, 2, None]),
                "f": rng.choice([0.5, float("nan"), None]),
                "s": rng.choice(["x", "", None]),
                "l": rng.choice([[1, 2], [], None, [2, 1]]),
                "st": rng.choice([{"k": 1}, {"k": None}, None]),
                "d": rng.choice(["p", "q", None]),
            }
            for _ in range(n)
        ]
        return pa.Table.from_pylist(data, schema=schema)

    for _ in range(20):
        removed, added = table(rng.randint(0, 60)), table(rng.randint(0, 60))
        deletes, inserts = multiset_difference(removed, added)
        names = schema.names
        old, new = rows(removed, names), rows(added, names)
        assert rows(deletes, names) == old - new
        assert rows(inserts, names) == new - old


def test_identical_sides_report_nothing_and_keep_their_order() -> None:
    t = pa.table({"id": [3, 1, 2, 1]})
    deletes, inserts = multiset_difference(t, t)
    assert deletes.num_rows == inserts.num_rows == 0
    deletes, inserts = multiset_difference(t, pa.table({"id": [1, 9]}))
    assert deletes.column("id").to_pylist() == [3, 2, 1] and inserts.column("id").to_pylist() == [9]
    assert Counter(deletes.column("id").to_pylist()) == Counter([3, 1, 2, 1]) - Counter([1])


def test_vectors_compare_by_their_items() -> None:
    """List columns of numbers (embeddings) take the packed path: same items cancel, any difference does not."""
    vec = pa.list_(pa.float32())
    removed = pa.table({"v": pa.array([[1.0, 2.0], [1.0], None, [], [float("nan")], [3.0]], vec)})
    added = pa.table({"v": pa.array([[1.0, 2.0], [2.0], None, [1.0], [float("nan")], [3.0, 0.0]], vec)})
    deletes, inserts = multiset_difference(removed.slice(1), added.slice(1))
    assert deletes.column("v").to_pylist() == [[], [3.0]]  # [1.0], None and [nan] are on both sides
    assert inserts.column("v").to_pylist() == [[2.0], [3.0, 0.0]]
    fixed = pa.list_(pa.int64(), 2)
    deletes, inserts = multiset_difference(pa.table({"v": pa.array([[1, 2], [3, 4]], fixed)}),
                                           pa.table({"v": pa.array([[3, 4], [2, 1]], fixed)}))  # fmt: skip
    assert deletes.column("v").to_pylist() == [[1, 2]] and inserts.column("v").to_pylist() == [[2, 1]]


def test_a_null_struct_and_a_struct_of_nulls_differ() -> None:
    st = pa.struct([("k", pa.int8()), ("v", pa.list_(pa.float64()))])
    removed = pa.table({"s": pa.array([None, {"k": None, "v": None}, {"k": 1, "v": [0.5]}], st)})
    added = pa.table({"s": pa.array([{"k": None, "v": None}, {"k": 1, "v": [0.5]}, {"k": 1, "v": [1.5]}], st)})
    deletes, inserts = multiset_difference(removed, added)
    assert deletes.column("s").to_pylist() == [None]
    assert inserts.column("s").to_pylist() == [{"k": 1, "v": [1.5]}]
