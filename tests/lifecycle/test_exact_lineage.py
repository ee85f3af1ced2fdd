"""Exact lineage: declared inputs (dal.write(inputs=...), lineage.inputs), inferred inputs = the reads since the
process's previous write, scopes, and the CLI labels. Catalog edges are checked on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

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


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def ups(cat: Catalog, name: str, version: int | None = None) -> list[tuple[str, int, str | None, str]]:
    """The upstream of a version as the catalog's edges have it (what dal lineage and the UI show)."""
    v = cat.version(name, version)
    return [(e.upstream, e.upstream_version, e.filters, e.how) for e in cat.upstream(name, v.number)]


def sources(*names: str) -> None:
    for n in names:
        dal.write(rows(4), n)
    lineage.clear_read_log()


def test_script_opens_a_and_b_then_writes_x_from_a_and_y_from_b(any_cat: Catalog) -> None:
    cat = any_cat
    sources("ex.a", "ex.b")
    # inferred: every read since the previous write. Both opens came before X; nothing was read between X and Y
    a, b = dal.open("ex.a"), dal.open("ex.b")
    dal.write(a.to_arrow(), "ex.x")
    dal.write(rows(2), "ex.y")
    assert ups(cat, "ex.x") == [("ex.a", 0, None, "inferred"), ("ex.b", 0, None, "inferred")]
    assert ups(cat, "ex.y") == []
    # reading B's rows after X's write makes B an input of the next write (a read after the previous write)
    dal.write(b.to_arrow(), "ex.y")
    assert ups(cat, "ex.y", 1) == [("ex.b", 0, None, "inferred")]
    # declared: exactly what each write names, whatever else was read
    a, b = dal.open("ex.a"), dal.open("ex.b")
    dal.write(a.to_arrow(), "ex.x", inputs=[a])
    dal.write(b.filter("id > 1").to_arrow(), "ex.y", inputs=[b.filter("id > 1")])
    assert ups(cat, "ex.x", 1) == [("ex.a", 0, None, "declared")]
    assert ups(cat, "ex.y", 2) == [("ex.b", 0, "id > 1", "declared")]
    # and the other direction: what was built from each
    a_down = lineage.lineage(cat, "ex.a", 0)["downstream"]
    assert a_down == [
        {"dataset": "ex.x", "version": 0, "how": "inferred"},
        {"dataset": "ex.x", "version": 1, "how": "declared"},
    ]
    b_down = lineage.lineage(cat, "ex.b", 0)["downstream"]
    assert [(d["dataset"], d["version"], d["how"]) for d in b_down] == [
        ("ex.x", 0, "inferred"),
        ("ex.y", 1, "inferred"),
        ("ex.y", 2, "declared"),
    ]


def test_notebook_sequence_each_output_lists_exactly_its_inputs(cat: Catalog) -> None:
    """Cells run top to bottom in one kernel; re-running a cell reads again."""
    sources("nb.raw", "nb.labels", "nb.unused")
    dal.open("nb.unused")  # cell 1: looked at, never used, before any write...
    raw = dal.open("nb.raw").to_arrow()  # cell 2
    dal.write(raw, "nb.clean")  # cell 3: ...so the first write infers it too (documented)
    assert [u[0] for u in ups(cat, "nb.clean")] == ["nb.unused", "nb.raw"]
    with lineage.scope():  # cell 4: a scope sees only its own reads
        feats = dal.open("nb.clean").to_arrow()
        labels = dal.open("nb.labels").to_arrow()
        dal.write(feats, "nb.train")
    assert ups(cat, "nb.train") == [("nb.clean", 0, None, "inferred"), ("nb.labels", 0, None, "inferred")]
    assert labels.num_rows == 4
    dal.write(rows(1), "nb.other")  # cell 5: nothing read since the previous write outside the scope
    assert ups(cat, "nb.other") == []
    clean = dal.open("nb.clean")  # cell 6: declared, exact
    with lineage.inputs(clean, ("nb.labels", 0)):
        dal.write(clean.to_arrow(), "nb.train")
    assert ups(cat, "nb.train", 1) == [("nb.clean", 0, None, "declared"), ("nb.labels", 0, None, "declared")]
    dal.write(rows(1), "nb.note", inputs=[])  # declared: made from nothing dal knows
    assert ups(cat, "nb.note") == []
    assert cat.version("nb.note").properties["lineage"]["upstream"] == []


def test_declared_inputs_are_checked_before_anything_is_written(cat: Catalog) -> None:
    sources("chk.a")
    with pytest.raises(dal.errors.DatasetNotFound):
        dal.write(rows(3), "chk.out", inputs=["chk.missing"])
    with pytest.raises(dal.errors.VersionNotFound):
        dal.write(rows(3), "chk.out", inputs=[("chk.a", 7)])
    with pytest.raises(dal.DalError, match="not a dataset, scan, version"):
        dal.write(rows(3), "chk.out", inputs=[42])
    with pytest.raises(dal.DalError, match="inputs must be a list"):
        dal.write(rows(3), "chk.out", inputs="chk.a")  # type: ignore[arg-type]
    assert cat.list_datasets("chk.out") == []  # nothing written, nothing recorded
    v = dal.write(rows(3), "chk.out", inputs=["chk.a", cat.version("chk.a", 0)])  # latest by name; a VersionInfo
    assert ups(cat, "chk.out") == [("chk.a", 0, None, "declared")]  # the same version twice: once
    assert v.properties["lineage"]["upstream"] == [
        {"dataset": "chk.a", "version": 0, "filters": None, "how": "declared"}
    ]


def test_a_failed_write_keeps_the_reads_for_its_retry(cat: Catalog) -> None:
    sources("fail.a")
    data = dal.open("fail.a").to_arrow()
    with pytest.raises(dal.DalError):
        dal.write(data, "fail.out", mode="bogus")  # type: ignore[arg-type]
    with pytest.raises(dal.DalError):
        dal.write(pa.table({"id": ["not an int"]}), "fail.a")  # schema mismatch: refused before writing
    dal.write(data, "fail.out")
    assert ups(cat, "fail.out") == [("fail.a", 0, None, "inferred")]


def test_a_scope_in_another_thread_does_not_see_this_threads_reads(cat: Catalog) -> None:
    sources("thr.a", "thr.b")
    dal.open("thr.a")
    done: list[str] = []

    def job() -> None:
        with lineage.scope():
            dal.write(dal.open("thr.b").to_arrow(), "thr.from_b")
        done.append("ok")

    t = threading.Thread(target=job)
    t.start()
    t.join()
    assert done == ["ok"]
    assert ups(cat, "thr.from_b") == [("thr.b", 0, None, "inferred")]
    dal.write(rows(1), "thr.from_a")
    assert ups(cat, "thr.from_a") == [("thr.a", 0, None, "inferred")]  # thr.b was read inside the scope only


def test_cli_labels_each_edge(cat: Catalog) -> None:
    sources("cli.a", "cli.b")
    a = dal.open("cli.a")
    dal.write(a.to_arrow(), "cli.x", inputs=[a])
    dal.open("cli.b")
    dal.write(rows(1), "cli.x")
    r = CliRunner().invoke(cli, ["--catalog", cat.url, "lineage", "cli.x", "0"])
    assert r.exit_code == 0, r.output
    assert "  cli.a @ 0  [declared]" in r.output
    r = CliRunner().invoke(cli, ["--catalog", cat.url, "lineage", "cli.x", "1"])
    assert "  cli.b @ 0  [inferred]" in r.output
    r = CliRunner().invoke(cli, ["--catalog", cat.url, "lineage", "cli.a", "0", "--json"])
    assert json.loads(r.stdout)["downstream"] == [{"dataset": "cli.x", "version": 0, "how": "declared"}]


def test_dropping_an_upstream_keeps_the_record_and_a_new_namesake_gets_no_edges(cat: Catalog, tmp_path: object) -> None:
    sources("drop.a")
    dal.write(dal.open("drop.a").to_arrow(), "drop.out")
    dal.lifecycle.drop("drop.a")
    up = lineage.lineage(cat, "drop.out", 0)["upstream"]
    assert up == [{"dataset": "drop.a", "version": 0, "filters": None, "how": "inferred"}]  # as recorded
    dal.write(rows(2), "drop.a", path=f"{tmp_path}/new_a")
    assert lineage.lineage(cat, "drop.a", 0)["downstream"] == []  # the new drop.a built nothing


@pytest.mark.slow
def test_spark_write_and_convert_take_declared_inputs(cat: Catalog, spark: object) -> None:
    sources("sp.a", "sp.b")
    a = dal.open("sp.a")
    dal.open("sp.b")
    df = spark.createDataFrame(a.to_arrow().to_pandas())  # type: ignore[attr-defined]
    dal.write(df, "sp.out", inputs=[a])
    assert ups(cat, "sp.out") == [("sp.a", 0, None, "declared")]
    assert cat.version("sp.out").properties["lineage"]["spark"]
    dal.convert(df, name="sp.conv", inputs=[a.filter("id < 3")])
    assert ups(cat, "sp.conv") == [("sp.a", 0, "id < 3", "declared")]
    with pytest.raises(dal.DalError, match="pass name= too"):
        dal.convert(df, inputs=[a])
