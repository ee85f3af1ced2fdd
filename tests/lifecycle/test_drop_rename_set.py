"""dal drop / rename / set through the real CLI entry point (and the Python functions), --json and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal import lifecycle
from dal.catalog import Catalog
from dal.catalog.errors import LocationTaken
from dal.cli.app import cli
from dal.errors import DalError
from tests.ownership.canaries import tree_hash


def table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "city": [f"c{i % 3}" for i in range(n)]})


def run(cat: Catalog, *args: str, input: str | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args], input=input)
    return r.exit_code, r.stdout, r.stderr


def files_under(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file()}


def test_drop_keeps_data_and_takes_tags(any_cat: Catalog) -> None:
    dal.write(table(5), "a.b", tags=["prod"])
    location = any_cat.get_dataset("a.b").location
    code, out, err = run(any_cat, "drop", "a.b", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out) == {"dataset": "a.b", "location": location, "purged": False, "deleted_files": 0, "left": []}
    assert Path(location, "_delta_log").is_dir()
    assert [d.name for d in any_cat.list_datasets()] == []
    # the tags went with it: the same name again starts without them
    any_cat.create_dataset("a.b", format="delta", location="/elsewhere/x")
    assert any_cat.tags("a.b") == {}


def test_drop_purge_delta_deletes_only_its_files(cat: Catalog, tmp_path: Path) -> None:
    dal.write(table(5), "a.b", partition_by=["city"])
    dal.write(table(5, 5), "a.b", partition_by=["city"])
    location = cat.get_dataset("a.b").location
    outside = tmp_path / "warehouse" / "neighbour.txt"
    outside.write_text("not dal's")
    code, out, err = run(cat, "drop", "a.b", "--purge", "--yes")
    assert code == 0, err
    assert "deleted" in out
    assert not Path(location).exists()
    assert outside.read_text() == "not dal's"
    # the name is free again: a write starts from version 0, not from the purged table
    v = dal.write(table(2), "a.b")
    assert v.number == 0 and dal.open("a.b").count() == 2


def test_purge_refuses_foreign_files_unless_forced(cat: Catalog) -> None:
    dal.write(table(5), "a.b")
    location = cat.get_dataset("a.b").location
    Path(location, "notes.md").write_text("mine")
    before = files_under(location)
    code, _out, err = run(cat, "drop", "a.b", "--purge", "--yes")
    assert code == 1 and err.startswith("dal: error:") and "notes.md" in err and "--force" in err
    assert files_under(location) == before and cat.get_dataset("a.b")
    code, out, err = run(cat, "drop", "a.b", "--purge", "--yes", "--force", "--json")
    assert code == 0, err
    assert json.loads(out)["left"] == ["notes.md"]
    assert files_under(location) == {"notes.md"}


def test_purge_petastorm(cat: Catalog) -> None:
    import numpy as np

    from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema

    schema = TensorSchema(
        "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2,), NdarrayCodec())]
    )
    rows = [{"id": i, "x": np.full(2, i, np.float32)} for i in range(4)]
    dal.write(rows, "p.s", format="petastorm", schema=schema)
    dal.write(rows, "p.s", format="petastorm")
    location = cat.get_dataset("p.s").location
    Path(location, "vfoo").mkdir()  # looks like nothing dal writes
    Path(location, "vfoo", "keep.txt").write_text("x")
    assert run(cat, "drop", "p.s", "--purge", "--yes")[0] == 1
    code, _out, err = run(cat, "drop", "p.s", "--purge", "--yes", "--force")
    assert code == 0, err
    assert files_under(location) == {"vfoo/keep.txt"}


def test_a_dataset_inside_another_ones_location_is_refused_before_any_data(cat: Catalog, tmp_path: Path) -> None:
    dal.write(table(3), "outer.t", path=str(tmp_path / "data"))
    before = tree_hash(tmp_path / "data")
    with pytest.raises(LocationTaken, match=r"'outer\.t'.*nothing was written"):
        dal.write(table(3), "inner.t", path=str(tmp_path / "data" / "inner"))
    with pytest.raises(LocationTaken, match=r"'outer\.t'.*nothing was written"):
        dal.write(table(3), "around.t", path=str(tmp_path))
    assert tree_hash(tmp_path / "data") == before and [d.name for d in cat.list_datasets()] == ["outer.t"]
    assert not (tmp_path / "data" / "inner").exists()
    assert dal.open("outer.t").count() == 3


def test_drop_needs_confirmation(cat: Catalog) -> None:
    dal.write(table(3), "a.b")
    code, _out, err = run(cat, "drop", "a.b")  # stdin is not a terminal: refuse, do nothing
    assert code != 0 and "--yes" in err
    code, _out, err = run(cat, "drop", "a.b", "--json")
    assert code == 2 and json.loads(err)["type"] == "usage" and "--yes" in json.loads(err)["error"]
    assert cat.get_dataset("a.b")


def test_drop_unknown_and_bad_names(cat: Catalog) -> None:
    dal.write(table(3), "a.b")
    code, _out, err = run(cat, "drop", "a.c", "--yes")
    assert code == 1 and err.count("\n") == 1 and "a.b" in err  # did you mean
    code, _out, err = run(cat, "drop", "../etc", "--yes", "--json")
    body = json.loads(err)
    assert code == 1 and body["exit_code"] == 1 and body["type"] == "InvalidName"


def test_rename(any_cat: Catalog) -> None:
    dal.write(table(3), "a.b", tags=["prod"])
    dal.write(table(3, 3), "a.b")
    dal.write(table(1), "x.y")
    code, out, err = run(any_cat, "rename", "a.b", "a.c", "--json")
    assert code == 0, err and json.loads(out)["name"] == "a.c"
    assert dal.open("a.c", "prod").count() == 3 and dal.open("a.c").count() == 6
    assert dal.write(table(1), "a.c").number == 2  # writes go on at the same location
    code, _out, err = run(any_cat, "rename", "a.c", "x.y")
    assert code == 1 and "exists" in err
    code, _out, err = run(any_cat, "rename", "a.c", "bad name")
    assert code == 1 and err.startswith("dal: error:")
    # the old name's table still carries it: a write to the old name must not adopt the renamed table
    with pytest.raises(DalError, match="location of dataset 'a.c'"):
        dal.write(table(1), "a.b")
    assert dal.open("a.c").count() == 7


def test_set(any_cat: Catalog) -> None:
    dal.write(table(3), "a.b")
    code, out, err = run(any_cat, "set", "a.b", "--owner", "team-vision", "--description", "cities",
                         "--property", "pii=no", "--property", "retention=90d", "--json")  # fmt: skip
    assert code == 0, err
    info = json.loads(out)
    assert info["owner"] == "team-vision" and info["description"] == "cities"
    assert info["properties"] == {"pii": "no", "retention": "90d"}
    info = lifecycle.set_info("a.b", properties={"pii": None}, time_column="id")
    assert info.properties == {"retention": "90d"} and info.time_column == "id"
    assert run(any_cat, "set", "a.b")[0] == 2  # nothing to set
    code, _out, err = run(any_cat, "set", "a.b", "--property", "novalue")
    assert code == 2 and "KEY=VALUE" in err
    code, _out, err = run(any_cat, "set", "a.b", "--property", "bad key=1")
    assert code == 1 and "property name" in err
    code, _out, err = run(any_cat, "set", "a.b", "--time-column", "nope", "--json")
    assert code == 1 and "nope" in json.loads(err)["error"]
    with pytest.raises(DalError):
        lifecycle.set_info("a.b", properties={"k": [1, 2]})  # type: ignore[dict-item]


def test_real_console_script(cat: Catalog, tmp_path: Path) -> None:
    dal.write(table(3), "a.b")
    exe = Path(sys.executable).with_name("dal")
    env = {**os.environ, "DAL_CATALOG_URL": cat.url}
    r = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and dal.__version__ in r.stdout
    r = subprocess.run([str(exe), "drop", "a.b", "--purge", "--yes", "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr and json.loads(r.stdout)["purged"] is True
    r = subprocess.run([str(exe), "drop", "a.b", "--yes", "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and json.loads(r.stderr)["type"] == "DatasetNotFound" and r.stdout == ""


def test_one_location_is_one_datasets(any_cat: Catalog) -> None:
    any_cat.create_dataset("a.one", format="delta", location="/w/t")
    # no alias over the same table, read-only or not (each would write, gc and purge it as its own), nor inside it
    for name, location in (("a.alias", "/w/t"), ("a.two", "/w/t/"), ("a.in", "/w/t/p")):
        with pytest.raises(DalError, match="location of dataset 'a.one'"):
            any_cat.create_dataset(name, format="delta", location=location, unique_location=False)
    assert [d.name for d in any_cat.list_datasets()] == ["a.one"]
