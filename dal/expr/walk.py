"""Walks over a filter tree that other packages need: its columns, its columns renamed, its AND-terms.

Visitors beside the tree (``dal.expr.tree.Visitor``): a new kind of node is one more method here, which the
type checker asks for, instead of a walk by reflection over dataclass fields in each package that needs one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from dal.expr.tree import And, Col, Compare, Expr, Fixed, IsIn, IsNull, Like, Lit, Not, Or, StrFunc, Visitor

__all__ = ["columns_in", "conjoin", "conjuncts", "renamed"]


class _Columns(Visitor[list[str]]):
    """The columns a filter names, in order of appearance, with repeats."""

    def visit_and(self, e: And) -> list[str]:
        return self.visit(e.left) + self.visit(e.right)

    def visit_or(self, e: Or) -> list[str]:
        return self.visit(e.left) + self.visit(e.right)

    def visit_not(self, e: Not) -> list[str]:
        return self.visit(e.operand)

    def visit_is_null(self, e: IsNull) -> list[str]:
        return [e.column.name]

    def visit_fixed(self, e: Fixed) -> list[str]:
        return [e.column.name]

    def visit_like(self, e: Like) -> list[str]:
        return [e.column.name]

    def visit_is_in(self, e: IsIn) -> list[str]:
        return [e.column.name]

    def visit_compare(self, e: Compare) -> list[str]:
        return [*_operand_columns(e.left), *_operand_columns(e.right)]


def _operand_columns(x: Col | Lit | StrFunc) -> list[str]:
    if isinstance(x, Col):
        return [x.name]
    if isinstance(x, StrFunc):
        return [x.column.name]
    return []


class _Renamed(Visitor[Expr]):
    """The filter with its column references renamed (``names``: old -> new)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names

    def col(self, c: Col) -> Col:
        return Col(self.names[c.name])

    def operand(self, x: Col | Lit | StrFunc) -> Col | Lit | StrFunc:
        if isinstance(x, Col):
            return self.col(x)
        if isinstance(x, StrFunc):
            return replace(x, column=self.col(x.column))
        return x

    def visit_and(self, e: And) -> Expr:
        return And(self.visit(e.left), self.visit(e.right))

    def visit_or(self, e: Or) -> Expr:
        return Or(self.visit(e.left), self.visit(e.right))

    def visit_not(self, e: Not) -> Expr:
        return Not(self.visit(e.operand))

    def visit_is_null(self, e: IsNull) -> Expr:
        return replace(e, column=self.col(e.column))

    def visit_fixed(self, e: Fixed) -> Expr:
        return replace(e, column=self.col(e.column))

    def visit_like(self, e: Like) -> Expr:
        return replace(e, column=self.col(e.column))

    def visit_is_in(self, e: IsIn) -> Expr:
        return replace(e, column=self.col(e.column))

    def visit_compare(self, e: Compare) -> Expr:
        left, right = self.operand(e.left), self.operand(e.right)
        assert not isinstance(right, StrFunc)  # a function is always on the left (parse_sql and bind)
        return replace(e, left=left, right=right)


def columns_in(e: Expr, *, ordered: bool = False) -> list[str]:
    """The columns ``e`` names (in order of appearance, with repeats when ``ordered``)."""
    out = _Columns().visit(e)
    return out if ordered else list(dict.fromkeys(out))


def renamed(e: Expr, names: Mapping[str, str]) -> Expr:
    """``e`` with its column references renamed (``names``: old -> new; every column ``e`` names)."""
    return _Renamed(names).visit(e)


def conjuncts(e: Expr | None) -> list[Expr]:
    """The AND-terms of ``e`` (nested ANDs flattened, left to right; ``[]`` for None)."""
    out: list[Expr] = []
    stack = [e] if e is not None else []
    while stack:
        t = stack.pop()
        if isinstance(t, And):
            stack += [t.right, t.left]
        else:
            out.append(t)
    return out


def conjoin(terms: Sequence[Expr]) -> Expr | None:
    """The AND of ``terms`` (left-nested, in order; None for no term)."""
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = And(out, t)
    return out
