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

The package: ``tree`` (the nodes and the ``Visitor`` base every walk derives from), ``sql`` (parse_sql,
to_sql), ``bind`` (types and literals), ``arrow`` (to_arrow, pushdown), ``stats`` (may_match: pruning files by
their recorded bounds). The names below are its public face;
modules inside dal import them from here (``from dal import expr as E``).
"""

from dal.expr.arrow import pushdown, to_arrow
from dal.expr.bind import bind
from dal.expr.sql import as_expr, parse_sql, to_sql
from dal.expr.stats import ColumnBounds, may_match
from dal.expr.tree import (
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
    Or,
    StrFunc,
    Visitor,
    abs_compare,
    col,
)

__all__ = [
    "AbsOf",
    "And",
    "Col",
    "ColumnBounds",
    "Compare",
    "CompareOp",
    "Expr",
    "Fixed",
    "IsIn",
    "IsNull",
    "Like",
    "Lit",
    "Not",
    "Or",
    "StrFunc",
    "Visitor",
    "abs_compare",
    "as_expr",
    "bind",
    "col",
    "may_match",
    "parse_sql",
    "pushdown",
    "to_arrow",
    "to_sql",
]
