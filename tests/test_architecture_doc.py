"""docs/ARCHITECTURE.md stays true to the code: every module it names (``dal/x/y.py``, ``dal.x.y``) exists, every
folder of the package appears in its subsystem map, and the layers it draws are those of pyproject.toml."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent is a module, not a package: name is an attribute
        return False


def test_every_named_module_exists() -> None:
    paths = set(re.findall(r"\b((?:dal|catalog)/[\w/]+\.py)\b", DOC))
    missing = [p for p in sorted(paths) if not (ROOT / p).exists()]
    dotted = set(re.findall(r"`((?:dal|catalog)(?:\.\w+)+)", DOC))
    for name in sorted(dotted):
        parts = name.split(".")
        # the longest importable prefix must be a module; what follows it is an attribute of it
        for n in range(len(parts), 0, -1):
            if _is_module(".".join(parts[:n])):
                module = importlib.import_module(".".join(parts[:n]))
                obj: object = module
                for attr in parts[n:]:
                    obj = getattr(obj, attr, None)
                    if obj is None:
                        missing.append(name)
                        break
                break
        else:
            missing.append(name)
    assert not missing, missing


def test_every_subsystem_folder_is_on_the_map() -> None:
    folders = sorted(p.name for p in (ROOT / "dal").iterdir() if (p / "__init__.py").exists())
    absent = [f for f in folders if f"dal/{f}/" not in DOC]
    assert not absent, absent


def test_the_layers_are_those_of_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    drawn = "\n".join(layers)
    assert f"```\n{drawn}\n```" in DOC
