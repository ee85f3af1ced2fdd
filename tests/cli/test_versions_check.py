"""``dal versions`` and the web UI never call a version readable on the catalog's word alone: a version whose
pinned files someone removed by hand is "unreadable" once storage is looked at (``dal versions --check``, the
UI's ``?check=1``), one the catalog marks expired says so without a look, and a listing without a check says
nothing about files (JSON ``readable``: null). Delta and Petastorm, through the real CLI and a real ``dal ui``."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal import ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.formats.registry import get_format
from tests.ui.conftest import start

SCHEMA = TensorSchema("Rows", [TensorField("id", np.int64, (), ScalarCodec())])


def data(fmt: str, start_at: int, n: int) -> object:
    ids = list(range(start_at, start_at + n))
    return [{"id": i} for i in ids] if fmt == "petastorm" else pa.table({"id": ids})


@pytest.fixture(params=["delta", "petastorm"])
def broken(request: pytest.FixtureRequest, sqlite_or_served_env: Catalog) -> tuple[Catalog, str]:
    """``t.data``: version 0, an overwrite (1: none of version 0's files), an append (2), version 3 expired by
    the catalog; then one of version 0's data files deleted by hand. Returns the catalog and the deleted file."""
    fmt = str(request.param)
    cat = sqlite_or_served_env  # SQLite, and through dal serve (not the UI's test: dal ui reads a database)
    extra = {"schema": SCHEMA} if fmt == "petastorm" else {}
    dal.write(data(fmt, 0, 4), "t.data", format=fmt, **extra)
    dal.write(data(fmt, 10, 2), "t.data", format=fmt, mode="overwrite")
    dal.write(data(fmt, 20, 2), "t.data", format=fmt)
    dal.write(data(fmt, 30, 2), "t.data", format=fmt)
    cat.expire_versions("t.data", [3], "expired by a test")
    info = cat.get_dataset("t.data")
    pinned = [f.uri for f in get_format(fmt).files(info.location, cat.version("t.data", 0), {})]
    later = {f.uri for v in (1, 2) for f in get_format(fmt).files(info.location, cat.version("t.data", v), {})}
    assert pinned and not set(pinned) & later
    os.remove(pinned[0])
    return cat, pinned[0]


def test_versions_check_finds_what_storage_lost(broken: tuple[Catalog, str]) -> None:
    cat, deleted = broken
    runner = CliRunner()
    plain = runner.invoke(cli, ["versions", "t.data"])
    assert plain.exit_code == 0, plain.output
    rows = list(csv.DictReader(io.StringIO(plain.stdout), delimiter="\t"))
    assert [r["status"] for r in rows] == ["", "", "", "expired"]  # no claim without a look
    listed = json.loads(runner.invoke(cli, ["versions", "t.data", "--json"]).output)
    assert [v["readable"] for v in listed] == [None, None, None, False]
    assert listed[3]["unreadable"] == "expired by a test"

    checked = runner.invoke(cli, ["versions", "t.data", "--check"])  # stdout not a terminal: tsv
    assert checked.exit_code == 0, checked.output
    rows = list(csv.DictReader(io.StringIO(checked.stdout), delimiter="\t"))
    assert {int(r["version"]): r["status"] for r in rows} == {
        0: "unreadable",
        1: "readable",
        2: "readable",
        3: "expired",
    }
    assert rows[0]["unreadable"].startswith("1 of its") and deleted in rows[0]["unreadable"]
    assert rows[3]["unreadable"] == "expired by a test" and rows[1]["unreadable"] == ""
    table = runner.invoke(cli, ["versions", "t.data", "--check", "-o", "table"])  # a terminal's: why, below it
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in table.output.splitlines() if line[:1] == "│"]
    assert {int(r[0]): r[-1] for r in rows} == {0: "unreadable", 1: "readable", 2: "readable", 3: "expired"}
    assert "version 0: 1 of its" in table.output and deleted in table.output.replace("\n", "")
    found = json.loads(runner.invoke(cli, ["versions", "t.data", "--check", "--json"]).output)
    assert [v["readable"] for v in found] == [False, True, True, False]
    assert deleted in found[0]["unreadable"] and found[1]["unreadable"] is None
    # only the listed versions are looked at
    newest = json.loads(runner.invoke(cli, ["versions", "t.data", "--check", "--json", "--limit", "2"]).output)
    assert [(v["version"], v["readable"]) for v in newest] == [(2, True), (3, False)]
    assert cat.version("t.data", 0).unavailable is None  # a check writes nothing to the catalog


@pytest.mark.parametrize("sqlite_or_served_env", ["sqlite"], indirect=True)
def test_the_ui_checks_when_asked(broken: tuple[Catalog, str], tmp_path: Path) -> None:
    cat, deleted = broken
    for server in start(cat.url, tmp_path):
        _, _, raw = server.get("/d/t.data?v=0")
        page = raw.decode()
        assert 'id="version-status">files not checked' in page and 'id="check-link"' in page
        assert 'id="version-status">readable' not in page
        _, _, raw = server.get("/d/t.data?v=0&check=1")
        page = raw.decode()
        assert 'id="version-status">unreadable' in page and 'id="unreadable-note"' in page and deleted in page
        _, _, raw = server.get("/d/t.data?v=2&check=1")
        assert 'id="version-status">readable' in raw.decode()
        status, body = server.json("/api/datasets/t.data/versions?check=1")
        assert status == 200 and [v["readable"] for v in body] == [False, True, True, False]
        _, body = server.json("/api/datasets/t.data/versions")
        assert [v["readable"] for v in body] == [None, None, None, False]
