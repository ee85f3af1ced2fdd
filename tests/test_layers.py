"""Layer contracts (as import-linter would check them): catalog never imports dal; heavy frameworks are
imported only lazily, inside functions, and pyspark/torch/tensorflow only from dal.adapters and dal.spark."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
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


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (annotations only: never imported at run time)."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        for inner in ast.walk(stmt)
    }


def imports(path: Path, *, top_level_only: bool) -> set[str]:
    """The top-level packages ``path`` imports at run time (imports under ``if TYPE_CHECKING:`` excluded)."""
    tree = ast.parse(path.read_text())
    hidden = _type_checking_only(tree)
    nodes = tree.body if top_level_only else [n for n in ast.walk(tree) if id(n) not in hidden]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _dal_modules(path: Path) -> set[str]:
    """The ``dal.*`` modules ``path`` imports at run time, by full name."""
    tree = ast.parse(path.read_text())
    hidden = _type_checking_only(tree)
    found: set[str] = set()
    for node in (n for n in ast.walk(tree) if id(n) not in hidden):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m == "dal" or m.startswith("dal.")}


def test_the_catalog_imports_nothing_else_of_dal() -> None:
    files = list((REPO / "dal" / "catalog").rglob("*.py"))
    assert len(files) > 10
    offenders = {
        p.name: sorted(m for m in _dal_modules(p) if m != "dal.catalog" and not m.startswith("dal.catalog."))
        for p in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_heavy_dependencies_are_imported_lazily() -> None:
    offenders = {
        str(p.relative_to(REPO)): sorted(imports(p, top_level_only=True) & HEAVY) for p in (REPO / "dal").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_adapters_import_frameworks() -> None:
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "dal").rglob("*.py")
        if not {"adapters", "spark"} & set(p.parts) and imports(p, top_level_only=False) & FRAMEWORKS
    ]
    assert offenders == []


def test_petastorm_is_never_imported() -> None:
    """petastorm cannot live beside a current pyarrow: dal implements its format instead."""
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "dal").rglob("*.py")
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
    from dal.formats.delta.format import DeltaFormat

    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[delta\]'"):
        DeltaFormat().exists("/nowhere", {})


def test_object_store_commits_without_obstore_name_the_cloud_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    uninstall(monkeypatch, "obstore")
    from dal.storage.location import Location

    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[cloud\]'"):
        Location.of("s3://bucket/ds").create_exclusive("_dal_versions/0.json", b"{}")


# Format knowledge lives in dal/formats/. Outside it, no identifier and no string (docstrings and comments
# aside: they may say what a format does) names a format or one of its files. The exceptions are user-facing
# names that cannot change (each says why).
FORMAT_WORDS = re.compile(r"(?<![a-z])(delta|petastorm)|_delta_log|_common_metadata", re.IGNORECASE)
ALLOWED = {
    ("dal/dataset.py", "petastorm_url"): "public API: where petastorm's own make_reader opens a version",
    ("dal/errors.py", "deltalake"): "the library whose exceptions dal.errors translates",
    ("dal/spark/frames.py", "cannot infer a petastorm codec for column "): "a user-facing message",
}


def format_names_in(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            texts = [node.name]
        elif isinstance(node, ast.arg):
            texts = [node.arg]
        elif isinstance(node, ast.alias):
            texts = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            texts = [node.value]
        else:
            continue
        found += [(node.lineno, t) for t in texts if FORMAT_WORDS.search(t)]
    return found


def test_no_module_outside_dal_formats_names_a_format() -> None:
    offenders = []
    for p in sorted((REPO / "dal").rglob("*.py")):
        rel = str(p.relative_to(REPO))
        if rel.startswith("dal/formats/"):
            continue
        offenders += [f"{rel}:{line}: {text!r}" for line, text in format_names_in(p) if (rel, text) not in ALLOWED]
    assert offenders == []


def test_the_import_contracts_hold() -> None:
    """import-linter's contracts in pyproject.toml: catalog below dal, formats independent of each other and
    below the readers, adapters not importing dal.formats, no import cycles inside dal."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    if not lint_imports.exists():
        if os.environ.get("CI"):
            pytest.fail("import-linter is not installed: make install")
        pytest.skip("import-linter is not installed (make install)")
    out = subprocess.run([str(lint_imports), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_typing_contracts_hold() -> None:
    """importlinter-typing.toml: the read engine (dal.read, dal.adapters, dal.spark) never imports dal.scan or
    anything above it, and has no import cycle, counting the imports made only for type checking."""
    lint_imports = Path(sys.executable).with_name("lint-imports")
    if not lint_imports.exists():
        if os.environ.get("CI"):
            pytest.fail("import-linter is not installed: pip install -e '.[dev]'")
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    config = "importlinter-typing.toml"
    out = subprocess.run(
        [str(lint_imports), "--no-cache", "--config", config], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


READ_ENGINE = ("dal.read", "dal.adapters", "dal.spark")
ABOVE_THE_ENGINE = ("dal.scan", "dal.feeds", "dal.dataset", "dal.mixing", "dal.api")


def _module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _dal_imports_with_typing(path: Path, modules: set[str]) -> set[str]:
    """The dal modules ``path`` imports anywhere: at module level, inside functions and under ``if TYPE_CHECKING:``
    (``from dal.read import reader`` names the module ``dal.read.reader``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dal")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("dal"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
    return {m for m in found if m in modules}


def test_the_read_engine_reads_one_way_down_type_checking_included() -> None:
    """Issue #33: dal.read, dal.adapters and dal.spark take the read source a Scan hands them and never import
    dal.scan (or above), not even under ``TYPE_CHECKING``; the import graph of dal.scan, dal.feeds and the engine,
    type-checking imports included, has no cycle."""
    paths = {_module_of(p): p for p in (REPO / "dal").rglob("*.py")}
    modules = set(paths)
    engine = {m for m in modules if m.startswith(READ_ENGINE) or m in ("dal.scan", "dal.feeds")}
    graph = {m: _dal_imports_with_typing(paths[m], modules) & engine for m in engine}
    upward = sorted(
        f"{m} -> {t}" for m in engine if m.startswith(READ_ENGINE) for t in graph[m] if t.startswith(ABOVE_THE_ENGINE)
    )
    assert upward == []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def cycle_from(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for t in sorted(graph[m] - {m}):
            if t.startswith(m + "."):  # a package importing its own submodule is not an arrow back
                continue
            if state.get(t) == 1:
                return [*path[path.index(t) :], t] if t in path else [*path, t]
            if t not in state and (found := cycle_from(t, [*path, t])):
                return found
        state[m] = 2
        return None

    cycles = [c for m in sorted(engine) if m not in state and (c := cycle_from(m, [m]))]
    assert cycles == []
