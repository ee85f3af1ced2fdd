"""Row filters: one expression tree, built in Python (``col("x") > 5``) or parsed from a SQL WHERE clause.

    col("label") == 1
    (col("station") == "YUL") & ~col("quality").is_null()
    col("station").isin(["YUL", "YYZ"])
    col("station").like("Y%") | col("name").lower().isin(["yul", "yyz"]) | (col("delta").abs() > 2)
    parse_sql("station = 'YUL' AND label >= 0")          # the same tree, via sqlglot's parser

SQL: comparisons, ``AND`` / ``OR`` / ``NOT``, ``IN (…)``, ``BETWEEN``, ``IS [NOT] NULL``, ``[NOT] LIKE`` /
``ILIKE`` (``%`` any run, ``_`` one character, ``\\`` escapes them), ``abs(x)``, ``lower(s)`` / ``upper(s)``
compared with literals, and ``DATE '…'`` / ``TIMESTAMP '…'`` literals. ``abs(x) op c`` is rewritten into
comparisons of ``x`` itself (``abs(x) > 2`` is ``x > 2 OR x < -2``), so it prunes partitions and row groups
like any comparison and never overflows on the type's minimum.

``bind(expr, schema)`` checks every column and literal against an Arrow schema and returns a tree with
typed literals; ``to_arrow(expr)`` turns a bound tree into a pyarrow compute expression.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.errors import FilterError

CompareOp = Literal["==", "!=", "<", "<=", ">", ">="]
_FLIP: dict[str, CompareOp] = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


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
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise FilterError(f"isin takes a list of values, not {type(values).__name__} {values!r}")
        return IsIn(self, tuple(Lit(v) for v in values))

    def is_null(self) -> IsNull:
        return IsNull(self)

    def between(self, low: object, high: object) -> Expr:
        """``low <= col <= high`` (inclusive, as SQL's BETWEEN)."""
        return (self >= low) & (self <= high)

    def like(self, pattern: str) -> Like:
        """SQL ``LIKE``: ``%`` matches any run of characters, ``_`` one character, ``\\`` escapes them."""
        return Like(self, _pattern(pattern), False)

    def ilike(self, pattern: str) -> Like:
        """``like``, ignoring case."""
        return Like(self, _pattern(pattern), True)

    def lower(self) -> StrFunc:
        """The column's strings in lower case, to compare with literals: ``col("s").lower() == "yul"``."""
        return StrFunc("lower", self)

    def upper(self) -> StrFunc:
        """The column's strings in upper case, to compare with literals."""
        return StrFunc("upper", self)

    def abs(self) -> AbsOf:
        """The column's absolute value, to compare with numbers: ``col("x").abs() > 2``."""
        return AbsOf(self)


def _pattern(pattern: object) -> str:
    if not isinstance(pattern, str):
        raise FilterError(f"a LIKE pattern is a string, not {type(pattern).__name__}")
    return pattern


class _Operand:
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
class StrFunc(_Operand):
    """``lower(column)`` or ``upper(column)``: an operand of a comparison with a string literal."""

    name: Literal["lower", "upper"]
    column: Col

    def _cmp(self, op: CompareOp, other: object) -> Expr:
        if isinstance(other, Col | _Operand):
            raise FilterError(f"{self.name}({self.column.name}) compares with a string literal, not a column")
        return Compare(op, self, Lit(other))


@dataclass(frozen=True, eq=False)
class AbsOf(_Operand):
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
    pos_term, neg_term = Compare(op, column, Lit(c)), Compare(_FLIP[op], column, Lit(neg))
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
    """A column of the dataset, for building filters: ``dal.col("label") == 1``."""
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


# -- SQL -----------------------------------------------------------------------------------------


def parse_sql(text: str) -> Expr:
    """Parse a SQL WHERE condition (``"station = 'YUL' AND label >= 0"``) with sqlglot into an ``Expr``.

    Raises:
        FilterError: malformed SQL, or a construct filters do not support (functions, subqueries, …).
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    try:
        tree = sqlglot.parse_one(text)
    except (ParseError, TokenError) as e:
        raise FilterError(f"malformed SQL filter {text!r}: {str(e).splitlines()[0]}") from None
    ops: dict[type, CompareOp] = {exp.EQ: "==", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}

    def operand(node: Any) -> Col | Lit | _Operand:
        if isinstance(node, exp.Paren):
            return operand(node.this)
        if isinstance(node, exp.Abs | exp.Lower | exp.Upper):
            inner = operand(node.this)
            if not isinstance(inner, Col):
                raise FilterError(f"{node.key}() takes a column in filter {text!r}: {node.sql()!r}")
            return AbsOf(inner) if isinstance(node, exp.Abs) else StrFunc(node.key, inner)  # type: ignore[arg-type]
        if isinstance(node, exp.Column):
            if node.table:
                raise FilterError(f"qualified column {node.sql()!r} in filter {text!r}: use the bare column name")
            return Col(node.name)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Lit(node.this)
            number = str(node.this)  # exact: 0.1 is the decimal 0.1 (see bind for how it meets a column)
            try:
                return Lit(Decimal(number) if any(c in number for c in ".eE") else int(number))
            except (ValueError, ArithmeticError):
                raise FilterError(f"bad number {number!r} in filter {text!r}") from None
        if isinstance(node, exp.Neg):
            inner = operand(node.this)
            if isinstance(inner, Lit) and isinstance(inner.value, int | float | Decimal):
                return Lit(-inner.value)
        if isinstance(node, exp.Boolean):
            return Lit(bool(node.this))
        if isinstance(node, exp.Null):
            return Lit(None)
        if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
            target = node.to.this.name.lower() if node.to is not None else ""
            raw = str(node.this.this)
            try:
                if target.startswith("timestamp") or target == "datetime":
                    return Lit(datetime.fromisoformat(raw))
                if target == "date":
                    return Lit(date.fromisoformat(raw))
            except ValueError:
                raise FilterError(f"bad {target} literal {raw!r} in filter {text!r}") from None
        raise FilterError(f"unsupported SQL in filter {text!r}: {node.sql()!r}")

    def convert(node: Any) -> Expr:
        if isinstance(node, exp.Paren):
            return convert(node.this)
        if isinstance(node, exp.And):
            return And(convert(node.this), convert(node.expression))
        if isinstance(node, exp.Or):
            return Or(convert(node.this), convert(node.expression))
        if isinstance(node, exp.Not):
            return Not(convert(node.this))
        if type(node) in ops:
            return compare(ops[type(node)], operand(node.this), operand(node.expression))
        if isinstance(node, exp.Like | exp.ILike):
            column, pattern = operand(node.this), operand(node.expression)
            if not isinstance(column, Col) or not isinstance(pattern, Lit) or not isinstance(pattern.value, str):
                raise FilterError(f"LIKE takes a column and a string pattern in filter {text!r}: {node.sql()!r}")
            like = Like(column, pattern.value, isinstance(node, exp.ILike))
            return Not(like) if node.args.get("negate") else like
        if isinstance(node, exp.Escape):
            raise FilterError(f"LIKE ... ESCAPE is not supported in filter {text!r}: '\\' escapes % and _")
        if isinstance(node, exp.In):
            column = operand(node.this)
            if not isinstance(column, Col | _Operand) or node.args.get("query") is not None:
                raise FilterError(f"unsupported IN in filter {text!r}: {node.sql()!r}")
            values = tuple(operand(v) for v in node.expressions)
            if any(not isinstance(v, Lit) for v in values):
                raise FilterError(f"IN takes literals only in filter {text!r}")
            if isinstance(column, _Operand):
                return column.isin([v.value for v in values])  # type: ignore[union-attr]
            result = IsIn(column, values)  # type: ignore[arg-type]
            return Not(result) if node.args.get("negate") else result
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            column = operand(node.this)
            if not isinstance(column, Col):
                raise FilterError(f"IS NULL needs a column in filter {text!r}")
            return IsNull(column)
        if isinstance(node, exp.Between):
            column = operand(node.this)
            low, high = operand(node.args["low"]), operand(node.args["high"])
            return And(compare(">=", column, low), compare("<=", column, high))
        raise FilterError(f"unsupported SQL in filter {text!r}: {node.sql()!r}")

    def compare(op: CompareOp, left: Col | Lit | _Operand, right: Col | Lit | _Operand) -> Expr:
        if isinstance(left, Lit) and isinstance(right, _Operand):
            left, right, op = right, left, _FLIP[op]
        if isinstance(left, _Operand):
            if not isinstance(right, Lit):
                raise FilterError(f"a function of a column compares with a literal only, in filter {text!r}")
            return left._cmp(op, right.value)
        if isinstance(right, _Operand):
            raise FilterError(f"a function of a column compares with a literal only, in filter {text!r}")
        return Compare(op, left, right)

    return convert(tree)


def as_expr(f: Expr | str) -> Expr:
    """A filter given as an ``Expr`` or a SQL string."""
    if isinstance(f, str):
        return parse_sql(f)
    if isinstance(f, Expr):
        return f
    raise FilterError(f"a filter is dal.col(...) expression or a SQL string, not {type(f).__name__}")


# -- binding to a schema ---------------------------------------------------------------------------
#
# SQL's numeric semantics: a literal is compared with the column's values as the number it is, never
# truncated to the column's type. ``bind`` rewrites each comparison into one whose literal the column's
# type holds exactly, so every engine (pyarrow, partition and statistics pruning, Spark) computes the
# same answer: on an integer column ``id = 1.5`` is false, ``id < 1.5`` is ``id <= 1``, ``id > 1e20``
# is false and ``id <> 1e20`` is true (each NULL on a NULL row, as in SQL).
#
# Literal conversions: a float column compares as float64 with the literal rounded to float64 (SQL's
# cast of a numeric literal to DOUBLE), so a float32 column never equals 0.1; integer, decimal, date and
# timestamp columns compare exactly (a timestamp of finer precision than the column's unit falls between
# two of its values; a date column's value is that day's midnight). NaN literals are refused: comparisons
# with NaN are never true; NaN values in float columns compare as IEEE 754 says (false, except ``<>``).


@dataclass(frozen=True)
class Fixed(Expr):
    """``result`` for every row where ``column`` is not NULL, NULL where it is: a comparison that the
    column's type decides alone (``id = 1.5`` on an integer column is Fixed(id, False))."""

    column: Col
    result: bool

    def columns(self) -> set[str]:
        return {self.column.name}


@dataclass(frozen=True)
class _Place:
    """Where a literal falls among a column type's values: ``exact`` (a value of the type), else between
    ``down`` and ``up`` (the type's neighbouring values), or ``below`` / ``above`` the type's range."""

    exact: Any = None
    down: Any = None
    up: Any = None
    is_exact: bool = False
    below: bool = False
    above: bool = False


def _string_type(typ: pa.DataType) -> bool:
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ))


def _numeric_type(typ: pa.DataType) -> bool:
    return bool(pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ))


def _value_type(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def _number(value: Any, typ: pa.DataType, column: str, bad: FilterError) -> Fraction | float:
    """An exact rational for a numeric literal (±inf stays a float); NaN and non-numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | Fraction):
        raise bad
    if isinstance(value, float | Decimal) and math.isnan(value):
        raise FilterError(f"NaN literal compared with column {column!r}: comparisons with NaN are never true")
    if isinstance(value, float | Decimal) and math.isinf(value):
        return float(value)
    if isinstance(value, float) and pa.types.is_decimal(typ):
        return Fraction(Decimal(repr(value)))  # the number as written: 0.1 is 0.1 on a decimal column
    return Fraction(value)


def _int_place(v: Fraction | float, typ: pa.DataType) -> _Place:
    bits = typ.bit_width
    lo, hi = (0, 2**bits - 1) if pa.types.is_unsigned_integer(typ) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if isinstance(v, float):  # ±inf
        return _Place(above=v > 0, below=v < 0)
    fl, ce = math.floor(v), math.ceil(v)
    if fl == ce and lo <= fl <= hi:
        return _Place(exact=fl, is_exact=True)
    return _Place(down=fl, up=ce, below=v < lo, above=v > hi)


def _float_place(v: Fraction | float, typ: pa.DataType) -> _Place:
    dtype: Any = {16: np.float16, 32: np.float32, 64: np.float64}[typ.bit_width]
    try:
        v64 = float(v)
    except OverflowError:
        v64 = math.inf if v > 0 else -math.inf
    if math.isinf(v64) and not isinstance(v, float):  # a finite literal beyond float64: between max and inf
        big = float(np.finfo(dtype).max)
        return _Place(down=big, up=math.inf) if v64 > 0 else _Place(down=-math.inf, up=-big)
    with np.errstate(over="ignore"):
        near = dtype(v64)
    if float(near) == v64:
        return _Place(exact=float(near), is_exact=True)
    if float(near) > v64:
        return _Place(down=float(np.nextafter(near, dtype(-np.inf))), up=float(near))
    return _Place(down=float(near), up=float(np.nextafter(near, dtype(np.inf))))


def _decimal_place(v: Fraction | float, typ: pa.DataType) -> _Place:
    limit = 10**typ.precision - 1
    if isinstance(v, float):  # ±inf
        return _Place(above=v > 0, below=v < 0)
    scaled = v * 10**typ.scale
    fl, ce = math.floor(scaled), math.ceil(scaled)
    if fl == ce and -limit <= fl <= limit:
        return _Place(exact=_scaled(fl, typ.scale), is_exact=True)
    return _Place(down=_scaled(fl, typ.scale), up=_scaled(ce, typ.scale), below=scaled < -limit, above=scaled > limit)


def _scaled(units: int, scale: int) -> Decimal:
    return Decimal(units).scaleb(-scale)


_EPOCH = datetime(1970, 1, 1)
_UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _datetime_literal(value: Any, bad: FilterError) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise bad from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise bad
    # naive literals are UTC (documented); compared as naive UTC
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo is not None else value


def _timestamp_place(value: Any, typ: pa.DataType, bad: FilterError) -> _Place:
    naive = _datetime_literal(value, bad)
    per = _UNITS[typ.unit]
    micros = (naive - _EPOCH) // timedelta(microseconds=1)
    units = Fraction(micros * per, 1_000_000)
    lo, hi = -(2**63), 2**63 - 1

    def back(n: int) -> datetime | None:
        try:
            out = _EPOCH + timedelta(microseconds=n * 1_000_000 // per)
        except OverflowError:
            return None
        return out.replace(tzinfo=UTC) if typ.tz is not None else out

    fl, ce = math.floor(units), math.ceil(units)
    if fl == ce and lo <= fl <= hi:
        return _Place(exact=back(fl), is_exact=True)
    up = back(ce)
    return _Place(down=back(fl), up=up, below=units < lo, above=units > hi or up is None)


def _date_place(value: Any, bad: FilterError) -> _Place:
    if isinstance(value, str):
        try:
            return _Place(exact=date.fromisoformat(value), is_exact=True)
        except ValueError:
            pass
    if isinstance(value, date) and not isinstance(value, datetime):
        return _Place(exact=value, is_exact=True)
    moment = _datetime_literal(value, bad)  # a date column's value is its day's midnight (UTC)
    day = moment.date()
    if moment == datetime(day.year, day.month, day.day):
        return _Place(exact=day, is_exact=True)
    if day == date.max:
        return _Place(down=day, above=True)
    return _Place(down=day, up=day + timedelta(days=1))


def _place(value: Any, typ: pa.DataType, column: str) -> _Place:
    """Where the literal ``value`` falls among the values of ``typ`` (FilterError naming a mismatch)."""
    typ = _value_type(typ)
    if isinstance(value, np.bool_ | np.integer | np.floating):
        value = value.item()
    bad = FilterError(f"type mismatch: column {column!r} is {typ}, but the filter compares it with {value!r}")
    if pa.types.is_boolean(typ):
        if isinstance(value, bool):
            return _Place(exact=value, is_exact=True)
        raise bad
    if pa.types.is_integer(typ):
        return _int_place(_number(value, typ, column, bad), typ)
    if pa.types.is_floating(typ):
        return _float_place(_number(value, typ, column, bad), typ)
    if pa.types.is_decimal(typ):
        return _decimal_place(_number(value, typ, column, bad), typ)
    if _string_type(typ):
        if isinstance(value, str):
            return _Place(exact=value, is_exact=True)
        raise bad
    if pa.types.is_timestamp(typ):
        return _timestamp_place(value, typ, bad)
    if pa.types.is_date(typ):
        return _date_place(value, bad)
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        raise FilterError(f"column {column!r} is {typ} (encoded data): it cannot be filtered on")
    try:
        pa.scalar(value, type=typ)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise bad from None
    if not (pa.types.is_time(typ) or pa.types.is_duration(typ)):
        raise FilterError(f"column {column!r} is {typ}: filters compare numbers, strings, booleans and times")
    return _Place(exact=value, is_exact=True)


def _compare(op: CompareOp, column: Col, typ: pa.DataType, value: Any) -> Expr:
    """``column op value`` as a comparison with a literal of the column's type, or a Fixed result."""
    where = _place(value, typ, column.name)
    if where.is_exact:
        return Compare(op, column, Lit(where.exact))
    if op in ("==", "!="):
        return Fixed(column, op == "!=")
    if where.below or where.above:  # every value of the type is above (below) the literal
        return Fixed(column, (op in ("<", "<=")) == where.above)
    if op in ("<", "<="):  # column < v  <=>  column <= (the type's largest value below v)
        return Compare("<=", column, Lit(where.down))
    return Compare(">=", column, Lit(where.up))  # column > v  <=>  column >= (its smallest value above v)


def _comparable(a: pa.DataType, b: pa.DataType) -> bool:
    a, b = _value_type(a), _value_type(b)
    if _numeric_type(a) and _numeric_type(b):
        return not (pa.types.is_decimal(a) or pa.types.is_decimal(b)) or a == b
    if _string_type(a) and _string_type(b):
        return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    if pa.types.is_date(a) and pa.types.is_date(b):
        return True
    return bool(a == b and pa.types.is_boolean(a))


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type two comparable columns are cast to when pyarrow has no kernel for the pair (None: it has)."""
    a, b = _value_type(a), _value_type(b)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a != b:
        unit = max(a.unit, b.unit, key=lambda u: _UNITS[u])
        return pa.timestamp(unit, tz=None if a.tz is None else "UTC")
    if pa.types.is_date(a) and pa.types.is_date(b) and a != b:
        return pa.date32()
    ints = pa.types.is_integer(a) and pa.types.is_integer(b)
    if ints and pa.types.is_unsigned_integer(a) != pa.types.is_unsigned_integer(b) and 64 in (a.bit_width, b.bit_width):
        return pa.decimal128(20, 0)  # uint64 against a signed int: exact, no overflow
    return None


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Check ``expr`` against ``schema`` and give its literals the columns' types (see above).

    Raises:
        FilterError: an unknown column (with close names), a literal of the wrong type, a NaN literal,
        or two columns that cannot be compared.
    """
    from catalog.errors import suggest

    def field(c: Col) -> pa.Field:
        if c.name not in schema.names:
            hint = suggest(c.name, schema.names, f"columns are {', '.join(schema.names)}")
            raise FilterError(f"unknown column {c.name!r} in filter{hint}")
        return schema.field(c.name)

    def go(e: Expr) -> Expr:
        if isinstance(e, And):
            return And(go(e.left), go(e.right))
        if isinstance(e, Or):
            return Or(go(e.left), go(e.right))
        if isinstance(e, Not):
            return Not(go(e.operand))
        if isinstance(e, IsNull | Fixed):
            field(e.column)
            return e
        if isinstance(e, Like):
            f = field(e.column)
            if not _string_type(f.type):
                raise FilterError(f"type mismatch: LIKE needs a string column, not {f.name!r} ({f.type})")
            return Like(e.column, _pattern(e.pattern), bool(e.case_insensitive))
        if isinstance(e, Compare) and isinstance(e.left, StrFunc):
            fn, other, op = e.left, e.right, e.op
            f = field(fn.column)
            if not _string_type(f.type):
                raise FilterError(f"type mismatch: {fn.name}() needs a string column, not {f.name!r} ({f.type})")
            if not isinstance(other, Lit) or not isinstance(other.value, str):
                shown = other.value if isinstance(other, Lit) else other
                raise FilterError(f"{fn.name}({f.name}) compares with a string literal, not {shown!r}")
            return Compare(op, fn, other)
        if isinstance(e, IsIn):
            f = field(e.column)
            kept: list[Lit] = []
            for v in e.values:
                if v.value is None:
                    kept.append(v)
                    continue
                where = _place(v.value, f.type, f.name)
                if where.is_exact:
                    kept.append(Lit(where.exact))  # a value the type cannot hold equals no row
            if not kept:
                return Fixed(e.column, False)
            return IsIn(e.column, tuple(dict.fromkeys(kept)))
        if isinstance(e, Compare):
            left, right, op = e.left, e.right, e.op
            if isinstance(left, Lit) and isinstance(right, Col):
                left, right, op = right, left, _FLIP[op]
            if isinstance(left, Col) and isinstance(right, Col):
                a, b = field(left), field(right)
                if not _comparable(a.type, b.type):
                    raise FilterError(
                        f"type mismatch: cannot compare column {a.name!r} ({a.type}) with column {b.name!r} ({b.type})"
                    )
                return Compare(op, left, right)
            if not isinstance(left, Col):
                raise FilterError("a comparison needs at least one column")
            f = field(left)
            assert isinstance(right, Lit)
            if right.value is None:
                raise FilterError(f"compare {left.name!r} with NULL using is_null() / IS NULL, not {op}")
            return _compare(op, left, f.type, right.value)
        raise FilterError(f"not a filter: {e!r}")

    return go(expr)


# -- to pyarrow --------------------------------------------------------------------------------------

_NULL = pc.scalar(pa.scalar(None, pa.bool_()))


def to_arrow(expr: Expr, schema: pa.Schema) -> pc.Expression:
    """A pyarrow compute expression for a bound ``expr``, with SQL's NULL logic (a comparison with NULL
    is NULL; AND / OR / NOT are three-valued; ``x IN (…)`` is NULL for a NULL ``x``).

    Comparisons on float columns carry an ``is_nan`` term: NaN values make them false (``<>``: true), and
    Parquet statistics ignore NaN, so without the term pyarrow would prune row groups holding matching NaNs.
    """

    def typ(c: Col) -> pa.DataType:
        return _value_type(schema.field(c.name).type)

    def floating(c: Col) -> bool:
        return bool(pa.types.is_floating(typ(c)))

    def nan_guard(c: Col, term: pc.Expression, true_on_nan: bool) -> pc.Expression:
        if not floating(c):
            return term
        nan = pc.field(c.name).is_nan()
        return term | nan if true_on_nan else term & ~nan

    def pair_nan_guard(x: Col, y: Col, term: pc.Expression, true_on_nan: bool) -> pc.Expression:
        """The same for two columns (a partition column becomes a literal under its partition's guarantee,
        so statistics meet this comparison too): NaN against a non-NULL value decides it; NULL stays NULL."""
        if not (floating(x) or floating(y)):
            return term
        fx, fy = pc.field(x.name), pc.field(y.name)
        decided: pc.Expression = pc.scalar(False)
        for nan_side, other in ((x, fy), (y, fx)):
            if floating(nan_side):
                f = pc.field(nan_side.name)
                decided = decided | (f.is_valid() & f.is_nan() & other.is_valid())
        return term | decided if true_on_nan else term & ~decided

    def go(e: Expr) -> pc.Expression:
        if isinstance(e, And):
            return go(e.left) & go(e.right)
        if isinstance(e, Or):
            return go(e.left) | go(e.right)
        if isinstance(e, Not):
            return ~go(e.operand)
        if isinstance(e, IsNull):
            return pc.field(e.column.name).is_null()
        if isinstance(e, Fixed):
            unknown = pc.field(e.column.name).is_null() & _NULL
            return ~unknown if e.result else unknown
        if isinstance(e, Like):
            return pc.match_like(pc.field(e.column.name), e.pattern, ignore_case=e.case_insensitive)
        if isinstance(e, Compare) and isinstance(e.left, StrFunc):
            fn = e.left
            transform = pc.utf8_lower if fn.name == "lower" else pc.utf8_upper
            a = transform(pc.field(fn.column.name))
            assert isinstance(e.right, Lit)
            b = pc.scalar(pa.scalar(e.right.value, type=typ(fn.column)))
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
        if isinstance(e, IsIn):
            present = [v.value for v in e.values if v.value is not None]
            if floating(e.column) and 0.0 in present:
                present += [0.0, -0.0]  # is_in hashes bits; SQL says -0.0 = 0.0
            f = pc.field(e.column.name)
            term = pc.is_in(f, value_set=pa.array(present, type=typ(e.column)), skip_nulls=True)
            term = nan_guard(e.column, term, False) | (f.is_null() & _NULL)  # NULL IN (…) is NULL
            if any(v.value is None for v in e.values):
                term = term | _NULL  # x IN (…, NULL) is NULL unless x matches (NaN included)
            return term
        if isinstance(e, Compare):
            left, right = e.left, e.right
            if isinstance(left, Lit) and isinstance(right, Col):  # unbound trees: normalise the order
                left, right = right, left
                op = _FLIP[e.op]
            else:
                op = e.op
            assert isinstance(left, Col)
            a = pc.field(left.name)
            if isinstance(right, Col):
                b = pc.field(right.name)
                common = _common_type(typ(left), typ(right))
                if common is not None:
                    a, b = a.cast(common), b.cast(common)
                term = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
                return pair_nan_guard(left, right, term, op == "!=")
            assert isinstance(right, Lit)
            b = pc.scalar(pa.scalar(right.value, type=typ(left)))
            term = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
            return nan_guard(left, term, op == "!=")
        raise FilterError(f"not a filter: {e!r}")

    return go(expr)


def pushdown(expr: Expr, schema: pa.Schema) -> tuple[pc.Expression, bool]:
    """The filter to hand pyarrow's scans (row-group pruning), and whether rows still need ``to_arrow(expr)``.

    Parquet statistics leave NaN out of min/max, and when a row group's min equals its max pyarrow
    substitutes that value for the column in the whole filter, ``is_nan`` terms included: a group of
    [NaN, 1, 1] is then pruned from ``x <> 1`` and ``NOT x < 5`` although its NaN row matches. So every
    float comparison whose NaN rows could be lost is replaced by a constant that only widens the filter
    (``<>`` by TRUE; other comparisons and IN by FALSE under an odd number of NOTs); the widened filter
    prunes soundly, and the exact ``to_arrow(expr)`` is applied to the rows it lets through (True).
    """
    widened = False

    def floating(c: Col) -> bool:
        return bool(pa.types.is_floating(_value_type(schema.field(c.name).type)))

    def touches_float(e: Compare | IsIn) -> bool:
        if isinstance(e, IsIn):
            return floating(e.column)
        return any(isinstance(x, Col) and floating(x) for x in (e.left, e.right))

    def go(e: Expr, positive: bool) -> pc.Expression:
        nonlocal widened
        if isinstance(e, And):
            return go(e.left, positive) & go(e.right, positive)
        if isinstance(e, Or):
            return go(e.left, positive) | go(e.right, positive)
        if isinstance(e, Not):
            return ~go(e.operand, not positive)
        if isinstance(e, Compare | IsIn) and touches_float(e):
            nan_true = isinstance(e, Compare) and e.op == "!="  # what a NaN row gives the atom
            if nan_true == positive:  # statistics could decide against the NaN rows: widen
                widened = True
                return pc.scalar(positive)
        return to_arrow(e, schema)

    return go(expr, True), widened


_SQL_OPS = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def to_sql(expr: Expr) -> str:
    """A filter as SQL WHERE text (what the read log records): identifiers quoted where needed, literals
    as SQL spells them (``DATE '…'``, ``TIMESTAMP '…'``); a comparison the column's type decides alone
    (``Fixed``) reads ``(c IS NOT NULL OR NULL)`` (always true but on NULL) or ``(c IS NULL AND NULL)``."""

    def name(c: Col) -> str:
        return c.name if _IDENTIFIER.fullmatch(c.name) else '"' + c.name.replace('"', '""') + '"'

    def literal(v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool | np.bool_):
            return "TRUE" if v else "FALSE"
        if isinstance(v, float | np.floating):
            f = float(v)
            return repr(f) if math.isfinite(f) else f"CAST('{f!r}' AS DOUBLE)"
        if isinstance(v, int | np.integer | Decimal):
            return str(v)
        if isinstance(v, Fraction):
            return str(Decimal(v.numerator) / Decimal(v.denominator))
        if isinstance(v, datetime):
            return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
        if isinstance(v, date):
            return f"DATE '{v.isoformat()}'"
        text = v if isinstance(v, str) else repr(v)
        return "'" + text.replace("'", "''") + "'"

    def operand(x: Col | Lit | StrFunc) -> str:
        if isinstance(x, Col):
            return name(x)
        if isinstance(x, StrFunc):
            return f"{x.name}({name(x.column)})"
        return literal(x.value)

    def go(e: Expr) -> str:
        if isinstance(e, And):
            return f"({go(e.left)} AND {go(e.right)})"
        if isinstance(e, Or):
            return f"({go(e.left)} OR {go(e.right)})"
        if isinstance(e, Not):
            return f"NOT {go(e.operand)}"
        if isinstance(e, IsNull):
            return f"{name(e.column)} IS NULL"
        if isinstance(e, Fixed):
            c = name(e.column)
            return f"({c} IS NOT NULL OR NULL)" if e.result else f"({c} IS NULL AND NULL)"
        if isinstance(e, Like):
            return f"{name(e.column)} {'ILIKE' if e.case_insensitive else 'LIKE'} {literal(e.pattern)}"
        if isinstance(e, IsIn):
            return f"{name(e.column)} IN ({', '.join(literal(v.value) for v in e.values)})"
        if isinstance(e, Compare):
            return f"{operand(e.left)} {_SQL_OPS[e.op]} {operand(e.right)}"
        return repr(e)

    text = go(expr)
    return text[1:-1] if text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]) else text


def _balanced(text: str) -> bool:
    """Whether ``text``'s parentheses (outside string literals) balance without going negative."""
    depth, quoted = 0, False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        elif not quoted:
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth < 0:
                return False
    return depth == 0
