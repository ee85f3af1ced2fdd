"""Pruning files by statistics: whether any row of each file may pass a bound filter, decided from per-file
bounds (min, max, whether NULLs are present) before a file is opened — all files at once, as NumPy masks.

``may_match`` walks the tree once. Every node yields two masks: files where some row may make it TRUE, and
files where some row may make it FALSE (a NULL result is neither, as in SQL: NOT swaps them, AND / OR
combine them). A file is kept when its root may be TRUE. Missing bounds decide nothing (the file stays).

NaN-safe: statistics leave NaN out of min/max (Parquet, Delta), so a float column's bounds never prove that
no row is NaN. A NaN row makes every comparison FALSE except ``<>`` (TRUE), as ``to_arrow`` evaluates it; the
masks account for that in every file with a non-NULL value. Bounds that are NaN themselves decide nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.expr.bind import value_type
from dal.expr.tree import FLIP, And, Col, Compare, Expr, Fixed, IsIn, IsNull, Like, Lit, Not, Or, Visitor

Masks = tuple[np.ndarray, np.ndarray]  # (may be TRUE, may be FALSE), one bool per file


@dataclass(frozen=True)
class ColumnBounds:
    """One column's bounds in every file: ``lo`` / ``hi`` (an array of the column's type, NULL where unknown;
    None: unknown everywhere), ``some_null`` (a file may hold a NULL) and ``all_null`` (every row is NULL)."""

    lo: pa.Array | None
    hi: pa.Array | None
    some_null: np.ndarray
    all_null: np.ndarray


BoundsOf = Callable[[str], ColumnBounds | None]


def may_match(expr: Expr, schema: pa.Schema, bounds: BoundsOf, files: int) -> np.ndarray:
    """For each of ``files`` files, whether some row may pass ``expr`` (bound to ``schema``): False only where
    the bounds prove that none does.

    Args:
        expr: a bound filter (``dal.expr.bind``).
        schema: the schema it was bound to (column types).
        bounds: a column's bounds in every file; None when nothing is known of it.
        files: how many files the bounds describe.
    """
    return MayMatch(schema, bounds, files).visit(expr)[0]


def _mask(values: pa.Array | pa.ChunkedArray, default: bool) -> np.ndarray:
    """A bool mask with unknown (NULL) entries set to ``default``."""
    filled = pc.fill_null(values, default)
    if isinstance(filled, pa.ChunkedArray):
        filled = filled.combine_chunks()
    out: np.ndarray = filled.to_numpy(zero_copy_only=False).astype(bool)
    return out


class MayMatch(Visitor[Masks]):
    """The walk behind ``may_match``."""

    def __init__(self, schema: pa.Schema, bounds: BoundsOf, files: int) -> None:
        self.schema = schema
        self.bounds = bounds
        self.n = files
        self.cache: dict[str, ColumnBounds | None] = {}

    def ones(self) -> np.ndarray:
        return np.ones(self.n, dtype=bool)

    def unknown(self) -> Masks:
        return self.ones(), self.ones()

    def of(self, name: str) -> ColumnBounds | None:
        if name not in self.cache:
            self.cache[name] = self.bounds(name) if name in self.schema.names else None
        return self.cache[name]

    def floating(self, name: str) -> bool:
        return bool(pa.types.is_floating(value_type(self.schema.field(name).type)))

    def visit_and(self, e: And) -> Masks:
        (lt, lf), (rt, rf) = self.visit(e.left), self.visit(e.right)
        return lt & rt, lf | rf

    def visit_or(self, e: Or) -> Masks:
        (lt, lf), (rt, rf) = self.visit(e.left), self.visit(e.right)
        return lt | rt, lf & rf

    def visit_not(self, e: Not) -> Masks:
        t, f = self.visit(e.operand)
        return f, t

    def visit_is_null(self, e: IsNull) -> Masks:
        b = self.of(e.column.name)
        if b is None:
            return self.unknown()
        return b.some_null.copy(), ~b.all_null

    def visit_fixed(self, e: Fixed) -> Masks:
        b = self.of(e.column.name)
        valued = self.ones() if b is None else ~b.all_null
        none = np.zeros(self.n, dtype=bool)
        return (valued, none) if e.result else (none, valued)

    def visit_like(self, e: Like) -> Masks:
        return self.unknown()

    def _literal(self, name: str, value: object, like: pa.Array) -> pa.Scalar | None:
        """``value`` as a scalar of the bounds' type; None when it is not one exactly (or is NaN)."""
        if value is None:
            return None
        try:
            scalar = pa.scalar(value, type=value_type(self.schema.field(name).type))
            if scalar.type != like.type:
                scalar = scalar.cast(like.type)  # safe: refuses a lossy cast
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
        if pa.types.is_floating(scalar.type) and scalar.as_py() != scalar.as_py():
            return None
        return scalar

    def _known(self, b: ColumnBounds) -> tuple[pa.Array, pa.Array] | None:
        """(lo, hi) with NaN bounds made unknown; None when either is unknown everywhere."""
        if b.lo is None or b.hi is None:
            return None
        lo, hi = b.lo, b.hi
        if pa.types.is_floating(lo.type):
            lo = pc.if_else(pc.is_nan(lo), pa.scalar(None, lo.type), lo)
            hi = pc.if_else(pc.is_nan(hi), pa.scalar(None, hi.type), hi)
        return lo, hi

    def visit_is_in(self, e: IsIn) -> Masks:
        name = e.column.name
        b = self.of(name)
        if b is None or (known := self._known(b)) is None:
            return self.unknown()
        lo, hi = known
        valued = ~b.all_null
        may_true = np.zeros(self.n, dtype=bool)
        for v in e.values:
            if v.value is None:
                continue  # NULL in the list never makes a row TRUE
            s = self._literal(name, v.value, lo)
            if s is None:
                if v.value == v.value:  # not NaN: a value the bounds cannot compare with
                    return self.unknown()
                continue  # NaN matches no row
            may_true |= _mask(pc.and_kleene(pc.less_equal(lo, s), pc.greater_equal(hi, s)), True)
        return may_true & valued, valued

    def visit_compare(self, e: Compare) -> Masks:
        left, right, op = e.left, e.right, e.op
        if isinstance(left, Lit) and isinstance(right, Col):
            left, right, op = right, left, FLIP[op]
        if not (isinstance(left, Col) and isinstance(right, Lit)):
            return self.unknown()  # column against column, string functions
        name = left.name
        b = self.of(name)
        if b is None or (known := self._known(b)) is None:
            return self.unknown()
        lo, hi = known
        v = self._literal(name, right.value, lo)
        if v is None:
            return self.unknown()
        inside = pc.and_kleene(pc.less_equal(lo, v), pc.greater_equal(hi, v))
        only = pc.and_kleene(pc.equal(lo, v), pc.equal(hi, v))  # every non-NULL value is v
        if op == "==":
            t, f = _mask(inside, True), ~_mask(only, False)
        elif op == "!=":
            t, f = ~_mask(only, False), _mask(inside, True)
        elif op == "<":
            t, f = _mask(pc.less(lo, v), True), _mask(pc.greater_equal(hi, v), True)
        elif op == "<=":
            t, f = _mask(pc.less_equal(lo, v), True), _mask(pc.greater(hi, v), True)
        elif op == ">":
            t, f = _mask(pc.greater(hi, v), True), _mask(pc.less_equal(lo, v), True)
        else:  # ">="
            t, f = _mask(pc.greater_equal(hi, v), True), _mask(pc.less(lo, v), True)
        valued = ~b.all_null
        t, f = t & valued, f & valued
        if self.floating(name):  # a NaN row (never in the bounds): TRUE for <>, FALSE otherwise
            if op == "!=":
                t = t | valued
            else:
                f = f | valued
        return t, f
