"""Binding a filter to a schema: every column checked, every literal placed among its column type's values.

SQL's numeric semantics: a literal is compared with the column's values as the number it is, never
truncated to the column's type. ``bind`` rewrites each comparison into one whose literal the column's
type holds exactly, so every engine (pyarrow, partition and statistics pruning, Spark) computes the
same answer: on an integer column ``id = 1.5`` is false, ``id < 1.5`` is ``id <= 1``, ``id > 1e20``
is false and ``id <> 1e20`` is true (each NULL on a NULL row, as in SQL).

Literal conversions: a float column compares as float64 with the literal rounded to float64 (SQL's
cast of a numeric literal to DOUBLE), so a float32 column never equals 0.1; integer, decimal, date and
timestamp columns compare exactly (a timestamp of finer precision than the column's unit falls between
two of its values; a date column's value is that day's midnight). NaN literals are refused: comparisons
with NaN are never true; NaN values in float columns compare as IEEE 754 says (false, except ``<>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from dal.errors import FilterError
from dal.expr.tree import (
    FLIP,
    And,
    Col,
    Compare,
    CompareOp,
    Expr,
    Fixed,
    IsIn,
    IsNull,
    Like,
    Lit,
    Not,
    Or,
    StrFunc,
    Visitor,
    like_pattern,
)


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


def string_type(typ: pa.DataType) -> bool:
    """Whether ``typ`` holds strings (of any offset width)."""
    return bool(pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ))


def _numeric_type(typ: pa.DataType) -> bool:
    return bool(pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ))


def value_type(typ: pa.DataType) -> pa.DataType:
    """The type of the values (a dictionary-encoded column compares as its values)."""
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
UNITS = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


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
    per = UNITS[typ.unit]
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
    typ = value_type(typ)
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
    if string_type(typ):
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
    a, b = value_type(a), value_type(b)
    if _numeric_type(a) and _numeric_type(b):
        return not (pa.types.is_decimal(a) or pa.types.is_decimal(b)) or a == b
    if string_type(a) and string_type(b):
        return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b):
        return (a.tz is None) == (b.tz is None)
    if pa.types.is_date(a) and pa.types.is_date(b):
        return True
    return bool(a == b and pa.types.is_boolean(a))


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type two comparable columns are cast to when pyarrow has no kernel for the pair (None: it has)."""
    a, b = value_type(a), value_type(b)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a != b:
        unit = max(a.unit, b.unit, key=lambda u: UNITS[u])
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
    return Bind(schema).visit(expr)


class Bind(Visitor[Expr]):
    """The bound copy of a tree: every column checked against the schema, every literal given its column's type."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def field(self, c: Col) -> pa.Field:
        from dal.catalog.errors import suggest

        if c.name not in self.schema.names:
            hint = suggest(c.name, self.schema.names, f"columns are {', '.join(self.schema.names)}")
            raise FilterError(f"unknown column {c.name!r} in filter{hint}")
        return self.schema.field(c.name)

    def visit_and(self, e: And) -> Expr:
        return And(self.visit(e.left), self.visit(e.right))

    def visit_or(self, e: Or) -> Expr:
        return Or(self.visit(e.left), self.visit(e.right))

    def visit_not(self, e: Not) -> Expr:
        return Not(self.visit(e.operand))

    def visit_is_null(self, e: IsNull) -> Expr:
        self.field(e.column)
        return e

    def visit_fixed(self, e: Fixed) -> Expr:
        self.field(e.column)
        return e

    def visit_like(self, e: Like) -> Expr:
        f = self.field(e.column)
        if not string_type(f.type):
            raise FilterError(f"type mismatch: LIKE needs a string column, not {f.name!r} ({f.type})")
        return Like(e.column, like_pattern(e.pattern), bool(e.case_insensitive))

    def visit_is_in(self, e: IsIn) -> Expr:
        f = self.field(e.column)
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

    def visit_compare(self, e: Compare) -> Expr:
        if isinstance(e.left, StrFunc):
            fn, other, op = e.left, e.right, e.op
            f = self.field(fn.column)
            if not string_type(f.type):
                raise FilterError(f"type mismatch: {fn.name}() needs a string column, not {f.name!r} ({f.type})")
            if not isinstance(other, Lit) or not isinstance(other.value, str):
                shown = other.value if isinstance(other, Lit) else other
                raise FilterError(f"{fn.name}({f.name}) compares with a string literal, not {shown!r}")
            return Compare(op, fn, other)
        left, right, op = e.left, e.right, e.op
        if isinstance(left, Lit) and isinstance(right, Col):
            left, right, op = right, left, FLIP[op]
        if isinstance(left, Col) and isinstance(right, Col):
            a, b = self.field(left), self.field(right)
            if not _comparable(a.type, b.type):
                raise FilterError(
                    f"type mismatch: cannot compare column {a.name!r} ({a.type}) with column {b.name!r} ({b.type})"
                )
            return Compare(op, left, right)
        if not isinstance(left, Col):
            raise FilterError("a comparison needs at least one column")
        f = self.field(left)
        assert isinstance(right, Lit)
        if right.value is None:
            raise FilterError(f"compare {left.name!r} with NULL using is_null() / IS NULL, not {op}")
        return _compare(op, left, f.type, right.value)
