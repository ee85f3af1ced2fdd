"""Lineage follows `dal rename`: records written before a rename name the old name, and still resolve (real CLI)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal import lineage
from dal.catalog import Catalog
from dal.cli.app import cli


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[None]:
    lineage.clear_read_log()
    yield
    lineage.clear_read_log()


def run_json(cat: Catalog, *args: str) -> Any:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args, "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def build(src: str, dst: str, version: int | None = None) -> None:
    """``dst`` gets a new version written from ``src`` (this process reads src, then writes dst)."""
    lineage.clear_read_log()
    dal.write(dal.open(src, version).to_arrow(), dst)
    lineage.clear_read_log()


def test_lineage_follows_a_rename(any_cat: Catalog) -> None:
    cat = any_cat  # SQLite and the real PostgreSQL
    dal.write(rows(4), "ren.a")
    build("ren.a", "ren.c")  # c@0 from a@0
    run_json(cat, "rename", "ren.a", "ren.b")

    lb = run_json(cat, "lineage", "ren.b", "0")
    assert lb["downstream"] == [{"dataset": "ren.c", "version": 0, "how": "inferred"}]
    lc = run_json(cat, "lineage", "ren.c", "0")
    # the current name, and the name the record holds
    assert lc["upstream"] == [
        {"dataset": "ren.b", "version": 0, "filters": None, "how": "inferred", "recorded_as": "ren.a"}
    ]
    # the stored record itself is untouched
    assert cat.version("ren.c", 0).properties["lineage"]["upstream"][0]["dataset"] == "ren.a"
    # reads after the rename are recorded under the new name and found too
    build("ren.b", "ren.c")  # c@1 from b@0
    lb = run_json(cat, "lineage", "ren.b", "0", "--depth", "2")
    assert lb["downstream"] == [
        {"dataset": "ren.c", "version": 0, "how": "inferred", "downstream": []},
        {"dataset": "ren.c", "version": 1, "how": "inferred", "downstream": []},
    ]
    assert run_json(cat, "lineage", "ren.c", "1")["upstream"] == [
        {"dataset": "ren.b", "version": 0, "filters": None, "how": "inferred"}
    ]


def test_a_new_dataset_with_the_old_name_is_not_confused(cat: Catalog, tmp_path: Path) -> None:
    dal.write(rows(4), "ren.a")
    build("ren.a", "ren.c")  # c@0 from the first a@0
    run_json(cat, "rename", "ren.a", "ren.b")
    run_json(cat, "rename", "ren.b", "ren.b2")  # two renames: both old names are history
    dal.write(rows(2, 50), "ren.a", path=str(tmp_path / "new_a"))  # a new dataset called ren.a (elsewhere)
    build("ren.a", "ren.d")  # d@0 from the new a@0

    assert run_json(cat, "lineage", "ren.b2", "0")["downstream"] == [
        {"dataset": "ren.c", "version": 0, "how": "inferred"}
    ]
    assert run_json(cat, "lineage", "ren.a", "0")["downstream"] == [
        {"dataset": "ren.d", "version": 0, "how": "inferred"}
    ]
    up_c = run_json(cat, "lineage", "ren.c", "0")["upstream"]
    assert up_c == [{"dataset": "ren.b2", "version": 0, "filters": None, "how": "inferred", "recorded_as": "ren.a"}]
    assert run_json(cat, "lineage", "ren.d", "0")["upstream"] == [
        {"dataset": "ren.a", "version": 0, "filters": None, "how": "inferred"}
    ]
    former = [f["name"] for f in cat.get_dataset("ren.b2").properties["former_names"]]
    assert former == ["ren.a", "ren.b"]


def test_like_wildcards_in_names_match_only_themselves(cat: Catalog) -> None:
    # `_` is a LIKE wildcard: x_y must not pick up records naming xzy (the exact check is in Python anyway)
    dal.write(rows(2), "ren.x_y")
    dal.write(rows(2), "ren.xzy")
    build("ren.xzy", "ren.out")
    run_json(cat, "rename", "ren.x_y", "ren.renamed")
    assert run_json(cat, "lineage", "ren.renamed", "0")["downstream"] == []
    assert run_json(cat, "lineage", "ren.xzy", "0")["downstream"] == [
        {"dataset": "ren.out", "version": 0, "how": "inferred"}
    ]
