"""The filter tree: nodes built in Python (``col("x") > 5``) or by ``parse_sql``, and the ``Visitor`` base that
every walk over a tree (binding, pyarrow, SQL text, Spark) derives from."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar

import numpy as np

from dal.errors import FilterError

CompareOp = Literal["==", "!=", "<", "<=", ">", ">="]
FLIP: dict[str, CompareOp] = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Expr:
    """A boolean row filter."""

    def __and__(self, other: Expr) -> Expr:
        return And(self, _expr(other))

    def __or__(self, other: Expr) -> Expr:
        return Or(self, _expr(other))

    def __invert__(self) -> Expr:
        return Not(self)

    def __bool__(self) -> bool:
        raise FilterError("use &, | and ~ to combine filters (not and / or / not), and compare with == inside them")

    def columns(self) -> set[str]:
        raise NotImplementedError


def _expr(x: object) -> Expr:
    if not isinstance(x, Expr):
        raise FilterError(f"cannot combine a filter with {x!r}")
    return x


@dataclass(frozen=True, eq=False)
class Col:
    """A column reference; comparisons build filter expressions."""

    name: str

    def _cmp(self, op: CompareOp, other: object) -> Compare:
        return Compare(op, self, other if isinstance(other, Col) else Lit(other))

    def __eq__(self, other: object) -> Compare:  # type: ignore[override]
        return self._cmp("==", other)

    def __ne__(self, other: object) -> Compare:  # type: ignore[override]
        return self._cmp("!=", other)

    def __lt__(self, other: object) -> Compare:
        return self._cmp("<", other)

    def __le__(self, other: object) -> Compare:
        return self._cmp("<=", other)

    def __gt__(self, other: object) -> Compare:
        return self._cmp(">", other)

    def __ge__(self, other: object) -> Compare:
        return self._cmp(">=", other)

    def __hash__(self) -> int:
        return hash(("col", self.name))

    def isin(self, values: Iterable[object]) -> IsIn:
        """The column's value is one of ``values`` (SQL ``IN``; a null is never in).

        Args:
            values: The values (literals of one type).

        Raises:
            FilterError: ``values`` is not a list of values (a string, or not iterable).
        """
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise FilterError(f"isin takes a list of values, not {type(values).__name__} {values!r}")
        return IsIn(self, tuple(Lit(v) for v in values))

    def is_null(self) -> IsNull:
        """The column's value is null (SQL ``IS NULL``)."""
        return IsNull(self)

    def between(self, low: object, high: object) -> Expr:
        """``low <= col <= high`` (inclusive, as SQL's BETWEEN).

        Args:
            low: Lower bound, included.
            high: Upper bound, included.
        """
        return (self >= low) & (self <= high)

    def like(self, pattern: str) -> Like:
        """SQL ``LIKE``: ``%`` matches any run of characters, ``_`` one character, ``\\`` escapes them.

        Args:
            pattern: The SQL pattern.
        """
        return Like(self, like_pattern(pattern), False)

    def ilike(self, pattern: str) -> Like:
        """``like``, ignoring case.

        Args:
            pattern: The SQL pattern.
        """
        return Like(self, like_pattern(pattern), True)

    def lower(self) -> StrFunc:
        """The column's strings in lower case, to compare with literals: ``col("s").lower() == "yul"``."""
        return StrFunc("lower", self)

    def upper(self) -> StrFunc:
        """The column's strings in upper case, to compare with literals."""
        return StrFunc("upper", self)

    def abs(self) -> AbsOf:
        """The column's absolute value, to compare with numbers: ``col("x").abs() > 2``."""
        return AbsOf(self)


def like_pattern(pattern: object) -> str:
    """A LIKE pattern, checked to be a string."""
    if not isinstance(pattern, str):
        raise FilterError(f"a LIKE pattern is a string, not {type(pattern).__name__}")
    return pattern


class Operand:
    """A function of a column that compares with literals (``lower(s) = 'a'``, ``abs(x) > 2``)."""

    def _cmp(self, op: CompareOp, other: object) -> Expr:
        raise NotImplementedError

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return self._cmp("==", other)

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return self._cmp("!=", other)

    def __lt__(self, other: object) -> Expr:
        return self._cmp("<", other)

    def __le__(self, other: object) -> Expr:
        return self._cmp("<=", other)

    def __gt__(self, other: object) -> Expr:
        return self._cmp(">", other)

    def __ge__(self, other: object) -> Expr:
        return self._cmp(">=", other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))

    def isin(self, values: Iterable[object]) -> Expr:
        """``f(x) IN (…)`` as ``f(x) = v1 OR f(x) = v2 …`` (NULL values are refused here)."""
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise FilterError(f"isin takes a list of values, not {type(values).__name__} {values!r}")
        items = list(values)
        if not items:
            raise FilterError("isin of a function needs at least one value")
        if any(v is None for v in items):
            raise FilterError("NULL in an IN list of a function: test IS NULL on the column instead")
        out = self._cmp("==", items[0])
        for v in items[1:]:
            out = Or(out, self._cmp("==", v))
        return out

    def between(self, low: object, high: object) -> Expr:
        return And(self._cmp(">=", low), self._cmp("<=", high))


@dataclass(frozen=True, eq=False)
class StrFunc(Operand):
    """``lower(column)`` or ``upper(column)``: an operand of a comparison with a string literal."""

    name: Literal["lower", "upper"]
    column: Col

    def _cmp(self, op: CompareOp, other: object) -> Expr:
        if isinstance(other, Col | Operand):
            raise FilterError(f"{self.name}({self.column.name}) compares with a string literal, not a column")
        return Compare(op, self, Lit(other))


@dataclass(frozen=True, eq=False)
class AbsOf(Operand):
    """``abs(column)``: comparisons with numbers become comparisons of the column (see ``abs_compare``)."""

    column: Col

    def _cmp(self, op: CompareOp, other: object) -> Expr:
        return abs_compare(op, self.column, other)


def abs_compare(op: CompareOp, column: Col, value: object) -> Expr:
    """``abs(column) op value`` as comparisons of ``column`` itself, with SQL's NULL and IEEE NaN results:
    ``abs(x) > c`` is ``x > c OR x < -c``, ``abs(x) = c`` is ``x = c OR x = -c``; against a negative ``c``,
    ``=`` is never true and ``<>`` always (NULL on NULL rows)."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | np.integer | np.floating):
        raise FilterError(f"abs({column.name}) compares with a number, not {type(value).__name__} {value!r}")
    if isinstance(value, float | np.floating) and math.isnan(value):
        raise FilterError(f"abs({column.name}) compared with NaN: comparisons with NaN are never true")
    c: Any = value.item() if isinstance(value, np.generic) else value
    neg = -c
    if op in ("==", "!=") and c < 0:
        return Fixed(column, op == "!=")
    pos_term, neg_term = Compare(op, column, Lit(c)), Compare(FLIP[op], column, Lit(neg))
    if op in ("==", ">", ">="):
        return Or(pos_term, neg_term)
    if op == "!=":
        return And(pos_term, Compare("!=", column, Lit(neg)))
    return And(pos_term, neg_term)


@dataclass(frozen=True)
class Like(Expr):
    """``column LIKE pattern`` (``ILIKE`` when ``case_insensitive``)."""

    column: Col
    pattern: str
    case_insensitive: bool = False

    def columns(self) -> set[str]:
        return {self.column.name}


def col(name: str) -> Col:
    """A column of the dataset, for building filters: ``dal.col("label") == 1``.

    Args:
        name: The column's name (a nested field as ``a.b``).

    Raises:
        FilterError: ``name`` is not a string.
    """
    if not isinstance(name, str):
        raise FilterError(f"dal.col takes a column name (a string), not {type(name).__name__}")
    return Col(name)


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Compare(Expr):
    op: CompareOp
    left: Col | Lit | StrFunc  # a function of a column is always on the left (parse_sql and bind put it there)
    right: Col | Lit

    def columns(self) -> set[str]:
        out = {x.name for x in (self.left, self.right) if isinstance(x, Col)}
        return out | {x.column.name for x in (self.left, self.right) if isinstance(x, StrFunc)}


@dataclass(frozen=True)
class IsIn(Expr):
    column: Col
    values: tuple[Lit, ...]

    def columns(self) -> set[str]:
        return {self.column.name}


@dataclass(frozen=True)
class IsNull(Expr):
    column: Col

    def columns(self) -> set[str]:
        return {self.column.name}


@dataclass(frozen=True)
class And(Expr):
    left: Expr
    right: Expr

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()


@dataclass(frozen=True)
class Or(Expr):
    left: Expr
    right: Expr

    def columns(self) -> set[str]:
        return self.left.columns() | self.right.columns()


@dataclass(frozen=True)
class Not(Expr):
    operand: Expr

    def columns(self) -> set[str]:
        return self.operand.columns()


@dataclass(frozen=True)
class Fixed(Expr):
    """``result`` for every row where ``column`` is not NULL, NULL where it is: a comparison that the
    column's type decides alone (``id = 1.5`` on an integer column is Fixed(id, False))."""

    column: Col
    result: bool

    def columns(self) -> set[str]:
        return {self.column.name}


R = TypeVar("R")


class Visitor(ABC, Generic[R]):
    """A walk over a filter tree, with one method per kind of node.

    ``visit`` dispatches on the node's class. Every kind is abstract here, so a new kind of node is one more
    method on this class, and the type checker then names each visitor that does not handle it yet. The
    visitors: ``bind.Bind`` (types), ``arrow.ToArrow`` and ``arrow.Pushdown`` (pyarrow), ``sql.ToSql`` (text),
    and ``SparkCondition`` in ``dal.spark.read`` (Spark columns). A comparison of a string function
    (``lower(s) = 'a'``) is a ``Compare`` whose left side is a ``StrFunc``.
    """

    def visit(self, e: Expr) -> R:
        name = _VISIT.get(type(e))
        if name is None:
            raise FilterError(f"not a filter: {e!r}")
        result: R = getattr(self, name)(e)
        return result

    @abstractmethod
    def visit_and(self, e: And) -> R: ...

    @abstractmethod
    def visit_or(self, e: Or) -> R: ...

    @abstractmethod
    def visit_not(self, e: Not) -> R: ...

    @abstractmethod
    def visit_is_null(self, e: IsNull) -> R: ...

    @abstractmethod
    def visit_fixed(self, e: Fixed) -> R: ...

    @abstractmethod
    def visit_like(self, e: Like) -> R: ...

    @abstractmethod
    def visit_is_in(self, e: IsIn) -> R: ...

    @abstractmethod
    def visit_compare(self, e: Compare) -> R: ...


_VISIT: dict[type, str] = {
    And: "visit_and",
    Or: "visit_or",
    Not: "visit_not",
    IsNull: "visit_is_null",
    Fixed: "visit_fixed",
    Like: "visit_like",
    IsIn: "visit_is_in",
    Compare: "visit_compare",
}
