"""Every public name has a docstring in one style (Google): a summary line, ``Args:`` when the function takes
arguments, ``Raises:`` when its own body raises. Walks ``dal.__all__`` and the public methods of Dataset, Scan,
Mix and Col (the API reference is generated from these docstrings)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dal
from dal.dataset import Dataset
from dal.expr import Col
from dal.mixing import Mix
from dal.scan import Scan

CLASSES = (Dataset, Scan, Mix, Col)


def public_functions() -> Iterator[tuple[str, Any]]:
    for name in dal.__all__:
        obj = getattr(dal, name)
        if inspect.isfunction(obj):
            yield f"dal.{name}", obj
    for cls in CLASSES:
        seen: set[str] = set()
        for base in cls.__mro__:  # its own methods and those it takes from dal's mixins (dal.feeds.Feeds, …)
            if not base.__module__.startswith("dal"):
                continue
            for name, member in vars(base).items():
                if name not in seen and not name.startswith("_") and inspect.isfunction(member):
                    seen.add(name)
                    yield f"{cls.__name__}.{name}", member


def takes_arguments(fn: Any) -> bool:
    return any(p.name not in ("self", "cls") for p in inspect.signature(fn).parameters.values())


def raises(fn: Any) -> bool:
    """Whether the function's own body has a ``raise X`` (a bare re-raise does not count)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0]
    nested = {id(n) for d in ast.walk(body) if d is not body and isinstance(d, ast.FunctionDef | ast.Lambda)
              for n in ast.walk(d)}  # fmt: skip
    return any(isinstance(n, ast.Raise) and n.exc is not None and id(n) not in nested for n in ast.walk(body))


def problems() -> list[str]:
    out = []
    for where, fn in public_functions():
        doc = inspect.getdoc(fn)
        if not doc:
            out.append(f"{where}: no docstring")
            continue
        if takes_arguments(fn) and "\nArgs:\n" not in doc:
            out.append(f"{where}: no Args section")
        if raises(fn) and "\nRaises:\n" not in doc:
            out.append(f"{where}: raises, but no Raises section")
    return out


def test_every_public_name_has_a_docstring_with_args_and_raises() -> None:
    found = problems()
    assert not found, "\n".join(found)


def test_the_walk_sees_the_api() -> None:
    names = {w for w, _ in public_functions()}
    assert {"dal.open", "dal.write", "Dataset.filter", "Scan.to_torch", "Mix.to_torch", "Col.isin"} <= names


def _raises_parsed(fn: object) -> tuple[list[str], list[str]]:
    """The exception names griffe's Google parser (what mkdocstrings renders) reads from ``fn``'s Raises
    section, and the warnings it logs."""
    import logging

    import griffe

    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("griffe")
    logger.addHandler(handler)
    try:
        doc = griffe.Docstring(inspect.getdoc(fn) or "", parser="google")
        sections = doc.parse()
    finally:
        logger.removeHandler(handler)
    names = [str(item.annotation) for s in sections if s.kind.value == "raises" for item in s.value]
    return names, messages


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (dal.open, {"DatasetNotFound", "VersionNotFound", "InvalidName", "CatalogUnavailable", "DalError"}),
        (dal.write, {"InvalidName", "SchemaMismatch", "TagExists", "DatasetExists", "CommittedNotRecorded"}),
        (dal.lifecycle.drop, {"DatasetNotFound", "DalError", "PurgeUnfinished"}),
        (dal.lifecycle.rename, {"DatasetNotFound", "DatasetExists", "InvalidName"}),
        (dal.lifecycle.head, {"DatasetNotFound", "VersionNotFound", "FilterError"}),
        (dal.lifecycle.gc, {"DatasetNotFound", "DalError"}),
    ],
)
def test_the_reference_renders_each_error_and_argument(fn: Any, expected: set[str]) -> None:
    """The reference pages turned the parser's warnings off, and the Raises table showed one mangled row:
    ``DatasetNotFound / VersionNotFound (with close names), InvalidName; ...``: the others were dropped. Every
    argument is documented too (``reference/lifecycle`` had almost none)."""
    names, warnings = _raises_parsed(fn)
    assert expected <= set(names), names
    assert all(n.isidentifier() for n in names), names
    assert not [w for w in warnings if "raises" in w.lower() or "failed to get" in w.lower()], warnings
    documented = inspect.getdoc(fn) or ""
    assert all(f"\n    {p}:" in documented for p in inspect.signature(fn).parameters), fn
    for page in ("api.md", "lifecycle.md"):
        assert "warnings: false" not in (Path(__file__).resolve().parents[1] / "docs" / "reference" / page).read_text()


def catalog_methods() -> Iterator[tuple[str, Any]]:
    """The public methods and properties of ``Catalog`` (its own and its mixins'): what reference/catalog.md renders."""
    from dal.catalog.store import Catalog

    seen: set[str] = set()
    for base in Catalog.__mro__:
        if not base.__module__.startswith("dal"):
            continue
        for name, member in vars(base).items():
            if name in seen or name.startswith("_"):
                continue
            fn = member.fget if isinstance(member, property) else member
            if inspect.isfunction(fn):
                seen.add(name)
                yield f"Catalog.{name}", fn


def test_the_catalog_reference_documents_every_argument_and_error() -> None:
    """Every public ``Catalog`` method has a summary, each argument under Args, and a Raises section griffe parses
    when its body raises (the reference had ~25 methods with almost no Args)."""
    found = []
    methods = dict(catalog_methods())
    assert {"Catalog.publish", "Catalog.label", "Catalog.search_datasets", "Catalog.upstream"} <= set(methods)
    for where, fn in methods.items():
        doc = inspect.getdoc(fn) or ""
        if not doc:
            found.append(f"{where}: no docstring")
            continue
        params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
        found += [f"{where}: {p} not under Args" for p in params if f"\n    {p}:" not in doc]
        if raises(fn) and "\nRaises:\n" not in doc:
            found.append(f"{where}: raises, but no Raises section")
        names, warnings = _raises_parsed(fn)
        if not all(n.isidentifier() for n in names) or [w for w in warnings if "raises" in w.lower()]:
            found.append(f"{where}: a Raises entry griffe cannot read: {names} {warnings}")
    assert not found, "\n".join(found)
