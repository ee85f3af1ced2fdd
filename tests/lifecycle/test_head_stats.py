"""dal head / dal stats through the real CLI entry point: rows, tensor summaries, footer statistics, bad input."""

from __future__ import annotations

import json
from datetime import date

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from click.testing import CliRunner

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema, lifecycle
from dal.catalog import Catalog
from dal.cli.app import cli


def run(cat: Catalog, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args])
    return r.exit_code, r.stdout, r.stderr


def weather(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "station": [f"s{i % 4}" for i in ids],
            "temp": pa.array([None if i % 5 == 0 else i / 2 for i in ids], pa.float64()),
            "day": [date(2026, 3, 1 + i % 3) for i in ids],
            "blob": [bytes(i % 7) for i in ids],
        }
    )


def test_head(any_cat: Catalog) -> None:
    cat = any_cat  # on SQLite, PostgreSQL and through a dal serve catalog: the same rows and errors
    dal.write(weather(50), "w.t", partition_by=["station"])
    dal.write(weather(10, 50), "w.t", partition_by=["station"])
    code, out, err = run(cat, "head", "w.t", "-n", "3", "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["version"] == 1 and len(body["rows"]) == 3
    assert set(body["rows"][0]) == {"id", "station", "temp", "day", "blob"}
    assert body["rows"][0]["blob"].endswith("bytes>")
    code, out, err = run(cat, "head", "w.t", "--version", "0", "--columns", "id,temp", "--where", "id >= 45 AND station = 's1'",
                         "--json")  # fmt: skip
    assert code == 0, err
    got = json.loads(out)["rows"]
    assert got == [{"id": 45, "temp": None}, {"id": 49, "temp": 24.5}]
    code, out, err = run(cat, "head", "w.t", "--where", "id > 1000")  # stdout not a terminal: tsv
    assert code == 0 and "no rows match" in err and out == "id\tstation\ttemp\tday\tblob\n"
    code, out, _ = run(cat, "head", "w.t", "-n", "2", "-o", "table")
    assert code == 0 and "station" in out and "w.t @ version 1" in out
    code, out, _ = run(cat, "head", "w.t", "-n", "2")  # tsv: the header and one line per row
    assert code == 0 and out.splitlines()[0] == "id\tstation\ttemp\tday\tblob" and len(out.splitlines()) == 3


def test_head_summarises_tensors(any_cat: Catalog) -> None:
    cat = any_cat  # on SQLite, PostgreSQL and through a dal serve catalog: the same answers
    schema = TensorSchema(
        "S",
        [TensorField("id", np.int64, (), ScalarCodec()), TensorField("img", np.uint8, (4, None, 3), NdarrayCodec())],
    )
    rows = [{"id": i, "img": np.zeros((4, 2 + i, 3), np.uint8)} for i in range(3)]
    dal.write(rows, "p.t", format="petastorm", schema=schema)
    version, records = lifecycle.head("p.t", n=5)
    assert version.number == 0
    assert sorted((r["id"], r["img"]) for r in records) == [(0, "uint8[4, 2, 3]"), (1, "uint8[4, 3, 3]"),
                                                            (2, "uint8[4, 4, 3]")]  # fmt: skip
    code, out, err = run(cat, "stats", "p.t", "--json")
    assert code == 0, err
    img = next(c for c in json.loads(out)["columns"] if c["column"] == "img")
    assert img["min"] is None and "uint8" in img["type"]


def test_head_bad_input(any_cat: Catalog) -> None:
    cat = any_cat  # on SQLite, PostgreSQL and through a dal serve catalog: the same rows and errors
    dal.write(weather(5), "w.t")
    code, _out, err = run(cat, "head", "w.t", "--where", "id >>> 3")
    assert code == 1 and err.startswith("dal: error:") and err.count("\n") == 1
    code, _out, err = run(cat, "head", "w.t", "--columns", "nope", "--json")
    assert code == 1 and "nope" in json.loads(err)["error"]
    code, _out, err = run(cat, "head", "w.t", "-n", "-1")
    assert code == 2
    code, _out, err = run(cat, "head", "w.t", "--version", "7", "--json")
    assert code == 1 and json.loads(err)["type"] == "VersionNotFound"


def test_stats_from_footers(any_cat: Catalog) -> None:
    cat = any_cat  # on SQLite, PostgreSQL and through a dal serve catalog: the same answers
    t1, t2 = weather(40), weather(20, 40)
    dal.write(t1, "w.s", partition_by=["station"])
    dal.write(t2, "w.s", partition_by=["station"])
    full = pa.concat_tables([t1, t2])
    code, out, err = run(cat, "stats", "w.s", "--json")
    assert code == 0, err
    st = json.loads(out)
    assert st["rows"] == 60 and st["version"] == 1 and st["exact"]
    cols = {c["column"]: c for c in st["columns"]}
    assert cols["id"]["min"] == 0 and cols["id"]["max"] == 59 and cols["id"]["nulls"] == 0
    assert cols["temp"]["nulls"] == full["temp"].null_count
    assert cols["temp"]["max"] == pc.max(full["temp"]).as_py()
    assert cols["day"]["min"] == "2026-03-01" and cols["day"]["max"] == "2026-03-03"
    assert cols["station"]["distinct"] == 4 and cols["station"]["min"] == "s0" and cols["station"]["nulls"] == 0
    assert cols["blob"]["min"] is None
    old = json.loads(run(cat, "stats", "w.s", "--version", "0", "--json")[1])
    assert old["rows"] == 40 and {c["column"]: c for c in old["columns"]}["id"]["max"] == 39
    code, out, _ = run(cat, "stats", "w.s", "-o", "table")  # the title: tsv has none
    assert code == 0 and "60 rows" in out and "distinct" in out


def test_stats_schema_evolution_and_errors(any_cat: Catalog) -> None:
    cat = any_cat  # on SQLite, PostgreSQL and through a dal serve catalog: the same answers
    dal.write(pa.table({"a": [1, 2, 3]}), "w.e")
    dal.write(pa.table({"a": [4], "b": ["x"]}), "w.e", schema_mode="merge")
    cols = {c.name: c for c in lifecycle.stats("w.e").columns}
    assert cols["b"].nulls == 3 and cols["b"].min == "x" and cols["a"].max == 4
    code, _out, err = run(cat, "stats", "w.nope", "--json")
    assert code == 1 and json.loads(err)["type"] == "DatasetNotFound"
