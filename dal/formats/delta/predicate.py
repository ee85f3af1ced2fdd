"""A bound filter (``dal.expr``) as delta-rs's predicate SQL (DataFusion's dialect), for a partial overwrite
(``write_deltalake(..., predicate=)``) and a delete (``DeltaTable.delete``).

The user's text is never passed through: ``dal.write(where=)`` / ``dal.delete(where=)`` parse it with
``dal.expr.parse_sql``, bind it against the version's schema (an unknown column is the ``FilterError`` every
filter gives), and this visitor writes what the bound tree means. Literals are written as the column's type
holds them: timestamps as ``arrow_cast`` of their integer ticks in the column's unit and zone (DataFusion
refuses a ``TIMESTAMP '…'`` literal against a zoned column), dates as ``DATE '…'``, floats by ``repr``
(NaN is refused by ``bind``), strings quoted with ``''``; a comparison ``bind`` decided alone (``Fixed``) as
``(c IS NOT NULL OR NULL)`` / ``(c IS NULL AND NULL)``.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from dal.errors import FilterError
from dal.expr import And, Col, Compare, Expr, Fixed, IsIn, IsNull, Like, Lit, Not, Or, StrFunc, Visitor

_OPS = {"==": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_UNITS = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}


def to_delta_sql(expr: Expr, schema: pa.Schema) -> str:
    """``expr`` (bound against ``schema``) as delta-rs predicate SQL.

    Raises:
        FilterError: a column or literal delta-rs's predicates cannot name (a nested field, a binary value).
    """
    return _ToDelta(schema).visit(expr)


def _name(c: Col) -> str:
    if "." in c.name:  # a nested field: delta-rs predicates name top-level columns only
        raise FilterError(f"a predicate of a write or delete names top-level columns, not {c.name!r}")
    return '"' + c.name.replace('"', '""') + '"'


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _ToDelta(Visitor[str]):
    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def literal(self, value: Any, column: Col) -> str:
        typ = self.schema.field(column.name).type
        if value is None:
            return "NULL"
        if pa.types.is_timestamp(typ):
            ticks = pa.scalar(value, typ).cast(pa.int64()).as_py()
            zone = f'Some("{typ.tz}")' if typ.tz else "None"
            return f"arrow_cast({ticks}, 'Timestamp({_UNITS[typ.unit]}, {zone})')"
        if isinstance(value, bool | np.bool_):
            return "TRUE" if value else "FALSE"
        if isinstance(value, datetime):
            raise FilterError(f"a time literal compares with a time column, not {column.name!r} ({typ})")
        if isinstance(value, date):
            return f"DATE '{value.isoformat()}'"
        if isinstance(value, float | np.floating):
            return repr(float(value))
        if isinstance(value, int | np.integer | Decimal):
            return str(value)
        if isinstance(value, Fraction):
            return str(Decimal(value.numerator) / Decimal(value.denominator))
        if isinstance(value, str):
            return _string(value)
        raise FilterError(f"a predicate of a write or delete cannot compare {column.name!r} with {value!r}")

    def operand(self, x: Col | Lit | StrFunc, column: Col) -> str:
        if isinstance(x, Col):
            return _name(x)
        if isinstance(x, StrFunc):
            return f"{x.name}({_name(x.column)})"
        return self.literal(x.value, column)

    def visit_and(self, e: And) -> str:
        return f"({self.visit(e.left)} AND {self.visit(e.right)})"

    def visit_or(self, e: Or) -> str:
        return f"({self.visit(e.left)} OR {self.visit(e.right)})"

    def visit_not(self, e: Not) -> str:
        return f"(NOT {self.visit(e.operand)})"

    def visit_is_null(self, e: IsNull) -> str:
        return f"({_name(e.column)} IS NULL)"

    def visit_fixed(self, e: Fixed) -> str:
        c = _name(e.column)
        return f"({c} IS NOT NULL OR NULL)" if e.result else f"({c} IS NULL AND NULL)"

    def visit_like(self, e: Like) -> str:
        return f"({_name(e.column)} {'ILIKE' if e.case_insensitive else 'LIKE'} {_string(e.pattern)})"

    def visit_is_in(self, e: IsIn) -> str:
        return f"({_name(e.column)} IN ({', '.join(self.literal(v.value, e.column) for v in e.values)}))"

    def visit_compare(self, e: Compare) -> str:
        left = e.left.column if isinstance(e.left, StrFunc) else e.left
        column = left if isinstance(left, Col) else e.right
        assert isinstance(column, Col)
        return f"({self.operand(e.left, column)} {_OPS[e.op]} {self.operand(e.right, column)})"
