"""Row filters: one expression tree, built in Python (``col("x") > 5``) or parsed from a SQL WHERE clause.

    col("label") == 1
    (col("station") == "YUL") & ~col("quality").is_null()
    col("station").isin(["YUL", "YYZ"])
    parse_sql("station = 'YUL' AND label >= 0")          # the same tree, via sqlglot's parser

``bind(expr, schema)`` checks every column and literal against an Arrow schema and returns a tree with
typed literals; ``to_arrow(expr)`` turns a bound tree into a pyarrow compute expression.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Literal

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
        return IsIn(self, tuple(Lit(v) for v in values))

    def is_null(self) -> IsNull:
        return IsNull(self)

    def between(self, low: object, high: object) -> Expr:
        """``low <= col <= high`` (inclusive, as SQL's BETWEEN)."""
        return (self >= low) & (self <= high)


def col(name: str) -> Col:
    """A column of the dataset, for building filters: ``dal.col("label") == 1``."""
    return Col(name)


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Compare(Expr):
    op: CompareOp
    left: Col | Lit
    right: Col | Lit

    def columns(self) -> set[str]:
        return {x.name for x in (self.left, self.right) if isinstance(x, Col)}


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

    def operand(node: Any) -> Col | Lit:
        if isinstance(node, exp.Paren):
            return operand(node.this)
        if isinstance(node, exp.Column):
            if node.table:
                raise FilterError(f"qualified column {node.sql()!r} in filter {text!r}: use the bare column name")
            return Col(node.name)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Lit(node.this)
            number = str(node.this)
            return Lit(float(number) if any(c in number for c in ".eE") else int(number))
        if isinstance(node, exp.Neg):
            inner = operand(node.this)
            if isinstance(inner, Lit) and isinstance(inner.value, int | float):
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
            return Compare(ops[type(node)], operand(node.this), operand(node.expression))
        if isinstance(node, exp.In):
            column = operand(node.this)
            if not isinstance(column, Col) or node.args.get("query") is not None:
                raise FilterError(f"unsupported IN in filter {text!r}: {node.sql()!r}")
            values = tuple(operand(v) for v in node.expressions)
            if any(isinstance(v, Col) for v in values):
                raise FilterError(f"IN takes literals only in filter {text!r}")
            return IsIn(column, values)  # type: ignore[arg-type]
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            column = operand(node.this)
            if not isinstance(column, Col):
                raise FilterError(f"IS NULL needs a column in filter {text!r}")
            return IsNull(column)
        if isinstance(node, exp.Between):
            column = operand(node.this)
            low, high = operand(node.args["low"]), operand(node.args["high"])
            return And(Compare(">=", column, low), Compare("<=", column, high))
        raise FilterError(f"unsupported SQL in filter {text!r}: {node.sql()!r}")

    return convert(tree)


def as_expr(f: Expr | str) -> Expr:
    """A filter given as an ``Expr`` or a SQL string."""
    if isinstance(f, str):
        return parse_sql(f)
    if isinstance(f, Expr):
        return f
    raise FilterError(f"a filter is dal.col(...) expression or a SQL string, not {type(f).__name__}")


# -- binding to a schema ---------------------------------------------------------------------------


def _coerce(value: Any, typ: pa.DataType, column: str) -> Any:
    """The literal as a value of the column's type, or FilterError naming the mismatch."""
    if value is None:
        return None
    bad = FilterError(f"type mismatch: column {column!r} is {typ}, but the filter compares it with {value!r}")
    if pa.types.is_boolean(typ):
        if isinstance(value, bool):
            return value
        raise bad
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_decimal(typ):
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise bad
        if pa.types.is_integer(typ) and isinstance(value, float) and not value.is_integer():
            return value  # compared as a float: x > 2.5 is meaningful on an int column
        return value
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        if isinstance(value, str):
            return value
        raise bad
    if pa.types.is_timestamp(typ):
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise bad from None
        if isinstance(value, date) and not isinstance(value, datetime):
            value = datetime(value.year, value.month, value.day)
        if not isinstance(value, datetime):
            raise bad
        if typ.tz is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)  # naive literals on a zoned column are UTC (documented)
        if typ.tz is None and value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value
    if pa.types.is_date(typ):
        if isinstance(value, str):
            try:
                return date.fromisoformat(value)
            except ValueError:
                raise bad from None
        if isinstance(value, datetime):
            return value.date()
        if isinstance(value, date):
            return value
        raise bad
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        raise FilterError(f"column {column!r} is {typ} (encoded data): it cannot be filtered on")
    return value


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Check ``expr`` against ``schema`` and give its literals the columns' types.

    Raises:
        FilterError: an unknown column (with close names) or a literal of the wrong type.
    """
    import difflib

    def field(c: Col) -> pa.Field:
        if c.name not in schema.names:
            close = difflib.get_close_matches(c.name, schema.names, n=3)
            hint = (
                f"; did you mean {', '.join(repr(x) for x in close)}?"
                if close
                else f"; columns are {', '.join(schema.names)}"
            )
            raise FilterError(f"unknown column {c.name!r} in filter{hint}")
        return schema.field(c.name)

    def go(e: Expr) -> Expr:
        if isinstance(e, And):
            return And(go(e.left), go(e.right))
        if isinstance(e, Or):
            return Or(go(e.left), go(e.right))
        if isinstance(e, Not):
            return Not(go(e.operand))
        if isinstance(e, IsNull):
            field(e.column)
            return e
        if isinstance(e, IsIn):
            f = field(e.column)
            return IsIn(e.column, tuple(Lit(_coerce(v.value, f.type, f.name)) for v in e.values))
        if isinstance(e, Compare):
            left, right, op = e.left, e.right, e.op
            if isinstance(left, Lit) and isinstance(right, Col):
                left, right, op = right, left, _FLIP[op]
            if isinstance(left, Col) and isinstance(right, Col):
                field(left)
                field(right)
                return Compare(op, left, right)
            if not isinstance(left, Col):
                raise FilterError("a comparison needs at least one column")
            f = field(left)
            assert isinstance(right, Lit)
            if right.value is None:
                raise FilterError(f"compare {left.name!r} with NULL using is_null() / IS NULL, not {op}")
            return Compare(op, left, Lit(_coerce(right.value, f.type, f.name)))
        raise FilterError(f"not a filter: {e!r}")

    return go(expr)


# -- to pyarrow --------------------------------------------------------------------------------------


def to_arrow(expr: Expr, schema: pa.Schema) -> pc.Expression:
    """A pyarrow compute expression for a bound ``expr`` (null comparisons are false, as in SQL)."""

    def value(x: Col | Lit, like: Col | Lit) -> Any:
        if isinstance(x, Col):
            return pc.field(x.name)
        typ = schema.field(like.name).type if isinstance(like, Col) else None
        return pc.scalar(pa.scalar(x.value, type=typ)) if typ is not None else pc.scalar(x.value)

    def go(e: Expr) -> pc.Expression:
        if isinstance(e, And):
            return go(e.left) & go(e.right)
        if isinstance(e, Or):
            return go(e.left) | go(e.right)
        if isinstance(e, Not):
            return ~go(e.operand)
        if isinstance(e, IsNull):
            return pc.field(e.column.name).is_null()
        if isinstance(e, IsIn):
            typ = schema.field(e.column.name).type
            return pc.field(e.column.name).isin(pa.array([v.value for v in e.values], type=typ))
        if isinstance(e, Compare):
            a, b = value(e.left, e.right), value(e.right, e.left)
            return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.op]
        raise FilterError(f"not a filter: {e!r}")

    return go(expr)
