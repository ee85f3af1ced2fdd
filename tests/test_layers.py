"""Layer contracts (as import-linter would check them): catalog never imports dal; heavy frameworks are
imported only lazily, inside functions, and pyspark/torch/tensorflow only from dal.adapters."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dal
from dal.errors import MissingDependency

REPO = Path(__file__).resolve().parents[1]
HEAVY = {
    "pyspark",
    "torch",
    "tensorflow",
    "deltalake",
    "pandas",
    "psycopg",
    "hive_metastore_client",
    "thrift",
    "obstore",
}
FRAMEWORKS = {"pyspark", "torch", "tensorflow"}


def imports(path: Path, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_catalog_never_imports_dal() -> None:
    offenders = [p.name for p in (REPO / "catalog").rglob("*.py") if "dal" in imports(p, top_level_only=False)]
    assert offenders == []


def test_heavy_dependencies_are_imported_lazily() -> None:
    offenders = {
        str(p.relative_to(REPO)): sorted(imports(p, top_level_only=True) & HEAVY)
        for p in [*(REPO / "dal").rglob("*.py"), *(REPO / "catalog").rglob("*.py")]
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_adapters_import_frameworks() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "dal").rglob("*.py")
        if "adapters" not in p.parts and imports(p, top_level_only=False) & FRAMEWORKS
    ]
    assert offenders == []


def test_petastorm_is_never_imported() -> None:
    """petastorm cannot live beside a current pyarrow: dal implements its format instead."""
    offenders = [
        str(p.relative_to(REPO))
        for p in [*(REPO / "dal").rglob("*.py"), *(REPO / "catalog").rglob("*.py")]
        if "petastorm" in imports(p, top_level_only=False)
    ]
    assert offenders == []


def uninstall(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make importing ``module`` (and its submodules, even ones already imported) fail for the rest of the test,
    as if its extra were not installed: a ``None`` in ``sys.modules`` makes Python raise ImportError."""
    import sys

    for name in [n for n in sys.modules if n == module or n.startswith(f"{module}.")] + [module]:
        monkeypatch.setitem(sys.modules, name, None)


def test_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    uninstall(monkeypatch, "deltalake")
    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[delta\]'"):
        dal.errors.require("deltalake", "delta")
    from dal.formats.delta import DeltaFormat

    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[delta\]'"):
        DeltaFormat().exists("/nowhere", {})


def test_object_store_commits_without_obstore_name_the_cloud_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    uninstall(monkeypatch, "obstore")
    from dal.location import Location

    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[cloud\]'"):
        Location.of("s3://bucket/ds").create_exclusive("_dal_versions/0.json", b"{}")
