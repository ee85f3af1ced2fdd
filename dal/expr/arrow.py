"""Filters as pyarrow compute expressions: ``to_arrow`` (exact, SQL's NULL logic, IEEE NaN) and ``pushdown`` (the
filter pyarrow's scans may prune row groups with)."""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc

from dal.expr.bind import common_type, value_type
from dal.expr.tree import FLIP, And, Col, Compare, Expr, Fixed, IsIn, IsNull, Like, Lit, Not, Or, StrFunc, Visitor


@functools.cache
def _null() -> pc.Expression:
    """A NULL boolean, made on first use (a pyarrow scalar made from Python imports pandas, ~0.25 s CPU)."""
    return pc.scalar(pa.scalar(None, pa.bool_()))


def _compared(op: str, a: pc.Expression, b: pc.Expression) -> pc.Expression:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def to_arrow(expr: Expr, schema: pa.Schema) -> pc.Expression:
    """A pyarrow compute expression for a bound ``expr``, with SQL's NULL logic (a comparison with NULL
    is NULL; AND / OR / NOT are three-valued; ``x IN (…)`` is NULL for a NULL ``x``).

    Comparisons on float columns carry an ``is_nan`` term: NaN values make them false (``<>``: true), and
    Parquet statistics ignore NaN, so without the term pyarrow would prune row groups holding matching NaNs.
    """
    return ToArrow(schema).visit(expr)


class ToArrow(Visitor[pc.Expression]):
    """A bound tree as one pyarrow expression (see ``to_arrow``)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def typ(self, c: Col) -> pa.DataType:
        return value_type(self.schema.field(c.name).type)

    def floating(self, c: Col) -> bool:
        return bool(pa.types.is_floating(self.typ(c)))

    def nan_guard(self, c: Col, term: pc.Expression, true_on_nan: bool) -> pc.Expression:
        if not self.floating(c):
            return term
        nan = pc.field(c.name).is_nan()
        return term | nan if true_on_nan else term & ~nan

    def pair_nan_guard(self, x: Col, y: Col, term: pc.Expression, true_on_nan: bool) -> pc.Expression:
        """The same for two columns (a partition column becomes a literal under its partition's guarantee,
        so statistics meet this comparison too): NaN against a non-NULL value decides it; NULL stays NULL."""
        if not (self.floating(x) or self.floating(y)):
            return term
        fx, fy = pc.field(x.name), pc.field(y.name)
        decided: pc.Expression = pc.scalar(False)
        for nan_side, other in ((x, fy), (y, fx)):
            if self.floating(nan_side):
                f = pc.field(nan_side.name)
                decided = decided | (f.is_valid() & f.is_nan() & other.is_valid())
        return term | decided if true_on_nan else term & ~decided

    def visit_and(self, e: And) -> pc.Expression:
        return self.visit(e.left) & self.visit(e.right)

    def visit_or(self, e: Or) -> pc.Expression:
        return self.visit(e.left) | self.visit(e.right)

    def visit_not(self, e: Not) -> pc.Expression:
        return ~self.visit(e.operand)

    def visit_is_null(self, e: IsNull) -> pc.Expression:
        return pc.field(e.column.name).is_null()

    def visit_fixed(self, e: Fixed) -> pc.Expression:
        unknown = pc.field(e.column.name).is_null() & _null()
        return ~unknown if e.result else unknown

    def visit_like(self, e: Like) -> pc.Expression:
        return pc.match_like(pc.field(e.column.name), e.pattern, ignore_case=e.case_insensitive)

    def visit_is_in(self, e: IsIn) -> pc.Expression:
        present = [v.value for v in e.values if v.value is not None]
        if self.floating(e.column) and 0.0 in present:
            present += [0.0, -0.0]  # is_in hashes bits; SQL says -0.0 = 0.0
        f = pc.field(e.column.name)
        term = pc.is_in(f, value_set=pa.array(present, type=self.typ(e.column)), skip_nulls=True)
        term = self.nan_guard(e.column, term, False) | (f.is_null() & _null())  # NULL IN (…) is NULL
        if any(v.value is None for v in e.values):
            term = term | _null()  # x IN (…, NULL) is NULL unless x matches (NaN included)
        return term

    def visit_compare(self, e: Compare) -> pc.Expression:
        if isinstance(e.left, StrFunc):
            fn = e.left
            transform = pc.utf8_lower if fn.name == "lower" else pc.utf8_upper
            assert isinstance(e.right, Lit)
            literal = pc.scalar(pa.scalar(e.right.value, type=self.typ(fn.column)))
            return _compared(e.op, transform(pc.field(fn.column.name)), literal)
        left, right, op = e.left, e.right, e.op
        if isinstance(left, Lit) and isinstance(right, Col):  # unbound trees: normalise the order
            left, right = right, left
            op = FLIP[op]
        assert isinstance(left, Col)
        a = pc.field(left.name)
        if isinstance(right, Col):
            b = pc.field(right.name)
            common = common_type(self.typ(left), self.typ(right))
            if common is not None:
                a, b = a.cast(common), b.cast(common)
            return self.pair_nan_guard(left, right, _compared(op, a, b), op == "!=")
        assert isinstance(right, Lit)
        b = pc.scalar(pa.scalar(right.value, type=self.typ(left)))
        return self.nan_guard(left, _compared(op, a, b), op == "!=")


def pushdown(expr: Expr, schema: pa.Schema) -> tuple[pc.Expression, bool]:
    """The filter to hand pyarrow's scans (row-group pruning), and whether rows still need ``to_arrow(expr)``.

    Parquet statistics leave NaN out of min/max, and when a row group's min equals its max pyarrow
    substitutes that value for the column in the whole filter, ``is_nan`` terms included: a group of
    [NaN, 1, 1] is then pruned from ``x <> 1`` and ``NOT x < 5`` although its NaN row matches. So every
    float comparison whose NaN rows could be lost is replaced by a constant that only widens the filter
    (``<>`` by TRUE; other comparisons and IN by FALSE under an odd number of NOTs); the widened filter
    prunes soundly, and the exact ``to_arrow(expr)`` is applied to the rows it lets through (True).
    """
    walk = Pushdown(schema)
    return walk.visit(expr), walk.widened


class Pushdown(Visitor[pc.Expression]):
    """``to_arrow`` with float comparisons that statistics could decide against NaN rows widened to constants;
    ``positive`` is the polarity of the node being visited (flipped under each NOT)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.exact = ToArrow(schema)
        self.positive = True
        self.widened = False

    def _atom(self, e: Compare | IsIn) -> pc.Expression:
        touches_float = (
            self.exact.floating(e.column)
            if isinstance(e, IsIn)
            else any(isinstance(x, Col) and self.exact.floating(x) for x in (e.left, e.right))
        )
        if touches_float:
            nan_true = isinstance(e, Compare) and e.op == "!="  # what a NaN row gives the atom
            if nan_true == self.positive:  # statistics could decide against the NaN rows: widen
                self.widened = True
                return pc.scalar(self.positive)
        return self.exact.visit(e)

    def visit_and(self, e: And) -> pc.Expression:
        return self.visit(e.left) & self.visit(e.right)

    def visit_or(self, e: Or) -> pc.Expression:
        return self.visit(e.left) | self.visit(e.right)

    def visit_not(self, e: Not) -> pc.Expression:
        self.positive = not self.positive
        try:
            return ~self.visit(e.operand)
        finally:
            self.positive = not self.positive

    def visit_is_null(self, e: IsNull) -> pc.Expression:
        return self.exact.visit(e)

    def visit_fixed(self, e: Fixed) -> pc.Expression:
        return self.exact.visit(e)

    def visit_like(self, e: Like) -> pc.Expression:
        return self.exact.visit(e)

    def visit_is_in(self, e: IsIn) -> pc.Expression:
        return self._atom(e)

    def visit_compare(self, e: Compare) -> pc.Expression:
        if isinstance(e.left, StrFunc):  # a string function never touches a float column
            return self.exact.visit(e)
        return self._atom(e)
