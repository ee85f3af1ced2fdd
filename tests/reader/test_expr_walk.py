"""The filter-tree walks other packages use (``dal.expr.walk``): columns in order of appearance, renaming, and
AND-terms, on every kind of node (the planner's column-mapping pushdown and the adapters' null checks use them)."""

from __future__ import annotations

import pyarrow as pa

from dal import expr as E
from dal.expr.walk import columns_in, conjoin, conjuncts, renamed

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64()), ("d", pa.int64())])


def bound(sql: str) -> E.Expr:
    return E.bind(E.parse_sql(sql), SCHEMA)


def test_columns_in_order_of_appearance_on_every_kind_of_node() -> None:
    e = bound("(b LIKE 'x%' OR a IN (1, 2)) AND NOT (c IS NULL) AND lower(b) = 'q' AND d > a AND a = 1.5")
    assert columns_in(e, ordered=True) == ["b", "a", "c", "b", "d", "a", "a"]
    assert columns_in(e) == ["b", "a", "c", "d"]


def test_renamed_renames_every_column_reference_and_keeps_the_rest() -> None:
    e = bound("(b LIKE 'x%' OR a IN (1, 2)) AND NOT (c IS NULL) AND lower(b) = 'q' AND d > a")
    out = renamed(e, {"a": "col-1", "b": "col-2", "c": "col-3", "d": "col-4"})
    assert columns_in(out, ordered=True) == ["col-2", "col-1", "col-3", "col-2", "col-4", "col-1"]
    assert E.to_sql(out).replace('"', "") == (
        E.to_sql(e).replace('"', "").replace("lower(b)", "lower(col-2)").replace("b LIKE", "col-2 LIKE")
        .replace("a IN", "col-1 IN").replace("c IS", "col-3 IS").replace("d > a", "col-4 > col-1")
    )  # fmt: skip


def test_conjuncts_flatten_nested_ands_left_to_right_and_conjoin_rebuilds_them() -> None:
    a, b, c = bound("a > 1"), bound("b = 'x'"), bound("c < 2.0 OR d = 1")
    tree = E.And(a, E.And(b, c))
    assert conjuncts(tree) == [a, b, c]
    assert conjuncts(None) == []
    assert conjuncts(c) == [c]  # an OR is one term
    assert conjoin([a, b, c]) == E.And(E.And(a, b), c)
    assert conjoin([]) is None
