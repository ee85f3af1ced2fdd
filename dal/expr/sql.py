"""Filters as SQL: ``parse_sql`` (a WHERE condition, parsed by sqlglot, into the tree) and ``to_sql`` (a tree
as WHERE text, for the read log)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from dal.errors import FilterError
from dal.expr.tree import (
    FLIP,
    AbsOf,
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
    Operand,
    Or,
    StrFunc,
    Visitor,
)


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

    def operand(node: Any) -> Col | Lit | Operand:
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
            if not isinstance(column, Col | Operand) or node.args.get("query") is not None:
                raise FilterError(f"unsupported IN in filter {text!r}: {node.sql()!r}")
            values = tuple(operand(v) for v in node.expressions)
            if any(not isinstance(v, Lit) for v in values):
                raise FilterError(f"IN takes literals only in filter {text!r}")
            if isinstance(column, Operand):
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

    def compare(op: CompareOp, left: Col | Lit | Operand, right: Col | Lit | Operand) -> Expr:
        if isinstance(left, Lit) and isinstance(right, Operand):
            left, right, op = right, left, FLIP[op]
        if isinstance(left, Operand):
            if not isinstance(right, Lit):
                raise FilterError(f"a function of a column compares with a literal only, in filter {text!r}")
            return left._cmp(op, right.value)
        if isinstance(right, Operand):
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

    text = _ToSql(name, literal, operand).visit(expr)
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


class _ToSql(Visitor[str]):
    def __init__(self, name: Callable[[Col], str], literal: Callable[[Any], str], operand: Callable[[Any], str]):
        self.name, self.literal, self.operand = name, literal, operand

    def visit_and(self, e: And) -> str:
        return f"({self.visit(e.left)} AND {self.visit(e.right)})"

    def visit_or(self, e: Or) -> str:
        return f"({self.visit(e.left)} OR {self.visit(e.right)})"

    def visit_not(self, e: Not) -> str:
        return f"NOT {self.visit(e.operand)}"

    def visit_is_null(self, e: IsNull) -> str:
        return f"{self.name(e.column)} IS NULL"

    def visit_fixed(self, e: Fixed) -> str:
        c = self.name(e.column)
        return f"({c} IS NOT NULL OR NULL)" if e.result else f"({c} IS NULL AND NULL)"

    def visit_like(self, e: Like) -> str:
        return f"{self.name(e.column)} {'ILIKE' if e.case_insensitive else 'LIKE'} {self.literal(e.pattern)}"

    def visit_is_in(self, e: IsIn) -> str:
        return f"{self.name(e.column)} IN ({', '.join(self.literal(v.value) for v in e.values)})"

    def visit_compare(self, e: Compare) -> str:
        return f"{self.operand(e.left)} {_SQL_OPS[e.op]} {self.operand(e.right)}"
