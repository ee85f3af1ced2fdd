"""Lineage recorded by dal.write (pandas, Arrow, Spark), the read log, and `dal lineage` through the real CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
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


def run(cat: Catalog, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args])
    return r.exit_code, r.stdout, r.stderr


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "x": [float(i) for i in range(n)]})


def test_pandas_write_records_who_and_empty_upstream(cat: Catalog) -> None:
    v = dal.write(pd.DataFrame({"id": [1, 2, 3]}), "lin.p")
    rec = v.properties["lineage"]
    assert rec["upstream"] == []  # nothing was read before this write
    assert rec["host"] == socket.gethostname()
    assert rec["dal_version"] == dal.__version__
    assert rec["user"] and rec["time"]
    assert "spark" not in rec
    assert cat.version("lin.p", 0).properties["lineage"] == rec  # stored in the catalog, not just returned
    # nobody built anything from it
    assert lineage.lineage(cat, "lin.p")["downstream"] == []


def test_chain_of_three_datasets(any_cat: Catalog) -> None:
    cat = any_cat
    dal.write(rows(10), "lin.a")
    dal.write(rows(5, 10), "lin.a")  # a@1
    dal.write(rows(3), "lin.unrelated")
    lineage.clear_read_log()

    a = dal.open("lin.a", 1)
    b = dal.write(a.to_arrow(), "lin.b")  # b@0 from a@1
    lineage.clear_read_log()
    c_in = dal.open("lin.b")
    c = dal.write(c_in.to_arrow(), "lin.c")  # c@0 from b@0
    lineage.clear_read_log()
    dal.write(rows(2, 100), "lin.c")  # c@1: read nothing

    assert [u["dataset"] for u in b.properties["lineage"]["upstream"]] == ["lin.a"]
    assert c.properties["lineage"]["upstream"] == [
        {"dataset": "lin.b", "version": 0, "filters": None, "how": "inferred"}
    ]
    assert cat.version("lin.c", 1).properties["lineage"]["upstream"] == []

    la = lineage.lineage(cat, "lin.a", 1, depth=3)
    assert la["downstream"] == [
        {
            "dataset": "lin.b",
            "version": 0,
            "how": "inferred",
            "downstream": [{"dataset": "lin.c", "version": 0, "how": "inferred", "downstream": []}],
        }
    ]
    assert lineage.lineage(cat, "lin.a", 0)["downstream"] == []  # a@0 was not read
    assert [(d.dataset, d.number) for d in lineage.downstream(cat, "lin.b", 0)] == [("lin.c", 0)]
    lc = lineage.lineage(cat, "lin.c", 0)
    assert (
        lc["upstream"] == [{"dataset": "lin.b", "version": 0, "filters": None, "how": "inferred"}]
        and lc["downstream"] == []
    )


def test_read_log(cat: Catalog) -> None:
    dal.write(rows(4), "lin.r")
    dal.write(rows(4, 4), "lin.r")
    assert dal.read_log() == []
    dal.open("lin.r", 0)
    dal.open("lin.r")
    log = dal.read_log()
    assert [(r.dataset, r.version, r.filters) for r in log] == [("lin.r", 0, None), ("lin.r", 1, None)]
    assert all(r.at for r in log)
    assert json.loads(json.dumps([r.to_dict() for r in log]))[1]["version"] == 1
    with pytest.raises(dal.DalError):
        dal.open("lin.nope")
    assert len(dal.read_log()) == 2  # a failed open is not a read
    # a write after two reads of the same version lists it once
    dal.open("lin.r")
    v = dal.write(rows(1), "lin.r2")
    assert [(u["dataset"], u["version"]) for u in v.properties["lineage"]["upstream"]] == [("lin.r", 0), ("lin.r", 1)]


def test_git_commit_of_the_program(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    (repo / "train.py").write_text("print(1)\n")
    for cmd in (["init", "-q"], ["add", "train.py"], ["commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True, env=env)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert lineage._git(str(repo)) == {"commit": head.stdout.strip(), "dirty": False}
    (repo / "train.py").write_text("print(2)\n")
    assert lineage._git(str(repo)) == {"commit": head.stdout.strip(), "dirty": True}
    assert lineage._git(str(tmp_path / "missing")) is None  # not a repository: no git entry, no failure


def test_cli(cat: Catalog) -> None:
    dal.write(rows(3), "lin.x")
    lineage.clear_read_log()
    dal.open("lin.x")
    dal.write(rows(3), "lin.y")

    code, out, err = run(cat, "lineage", "lin.y", "--json")
    assert code == 0, err
    body: dict[str, Any] = json.loads(out)
    assert body["dataset"] == "lin.y" and body["version"] == 0
    assert body["upstream"] == [{"dataset": "lin.x", "version": 0, "filters": None, "how": "inferred"}]
    assert body["downstream"] == []
    assert body["host"] == socket.gethostname()

    code, out, err = run(cat, "lineage", "lin.x", "0")
    assert code == 0, err
    assert "upstream: none" in out
    assert "downstream:\n  lin.y @ 0" in out

    code, out, err = run(cat, "lineage", "lin.x", "7")
    assert code == 1 and out == ""
    assert err.startswith("dal: error: ") and len(err.strip().splitlines()) == 1
    code, out, err = run(cat, "lineage", "lin.nope", "--json")
    assert code == 1 and json.loads(err)["type"] == "DatasetNotFound"


def test_registered_version_has_no_lineage(cat: Catalog, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "ext"), rows(3))
    dal.register("lin.ext", str(tmp_path / "ext"))
    code, out, err = run(cat, "lineage", "lin.ext")
    assert code == 0, err
    assert "no lineage recorded" in out


def test_spark_write(cat: Catalog, spark: Any) -> None:
    dal.write(rows(4), "lin.s_in")
    lineage.clear_read_log()
    src = dal.open("lin.s_in")
    df = spark.createDataFrame(src.to_arrow().to_pandas())
    v = dal.write(df, "lin.s_out")
    rec = v.properties["lineage"]
    sc = spark.sparkContext
    assert rec["spark"] == {"application_id": sc.applicationId, "master": sc.master}
    assert rec["upstream"] == [{"dataset": "lin.s_in", "version": 0, "filters": None, "how": "inferred"}]
    assert [(d.dataset, d.number) for d in lineage.downstream(cat, "lin.s_in", 0)] == [("lin.s_out", 0)]


def test_only_the_written_version_gets_lineage(cat: Catalog) -> None:
    from deltalake import write_deltalake

    dal.write(rows(3), "lin.f")
    location = cat.get_dataset("lin.f").location
    write_deltalake(location, rows(2, 50), mode="append")  # another tool commits; the catalog has not seen it
    lineage.clear_read_log()
    dal.open("lin.f")
    v = dal.write(rows(1, 90), "lin.f")  # its sync records the foreign commit too
    numbers = {x.number: x for x in cat.versions("lin.f")}
    assert v.number == 2 and set(numbers) == {0, 1, 2}
    assert "lineage" not in numbers[1].properties  # the foreign commit: not built by this process
    assert numbers[2].properties["lineage"]["upstream"] == [
        {"dataset": "lin.f", "version": 0, "filters": None, "how": "inferred"}
    ]
    assert [(d.dataset, d.number) for d in lineage.downstream(cat, "lin.f", 0)] == [("lin.f", 2)]
