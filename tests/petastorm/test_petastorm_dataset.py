"""Petastorm datasets in the catalog: immutable version directories, bad input, registration, processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dal
from dal import ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import FormatError, SchemaMismatch

SCHEMA = TensorSchema("Frames", [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("camera", np.str_, (), ScalarCodec()),
    TensorField("depth", np.float32, (4, 4), NdarrayCodec()),
    TensorField("rgb", np.uint8, (6, 8, 3), ImageCodec("png")),
])  # fmt: skip


def frames(n: int, start: int = 0) -> list[dict[str, object]]:
    return [
        {
            "id": i,
            "camera": f"cam{i % 3}",
            "depth": np.full((4, 4), i, np.float32),
            "rgb": np.full((6, 8, 3), i % 256, np.uint8),
        }
        for i in range(start, start + n)
    ]


def ids(version: int | None = None) -> list[int]:
    return sorted(int(i) for i in dal.open("cam.frames", version).to_numpy(["id"])["id"])


def snapshot(location: str) -> dict[str, tuple[int, int, bytes]]:
    out = {}
    for p in Path(location).rglob("*"):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(location))] = (st.st_ino, st.st_mtime_ns, p.read_bytes())
    return out


def test_versions_are_immutable_directories(cat: Catalog) -> None:
    v0 = dal.write(frames(9), "cam.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"], tags=["first"])
    location = cat.get_dataset("cam.frames").location
    d0 = dal.open("cam.frames", 0).petastorm_url.rsplit("/", 1)[1] + "/"
    before = {k: v for k, v in snapshot(location).items() if k.startswith(d0)}
    v1 = dal.write(frames(3, 100), "cam.frames", format="petastorm")
    v2 = dal.write(frames(2, 200), "cam.frames", format="petastorm", mode="overwrite")
    assert [(v.number, v.operation, v.row_count) for v in (v0, v1, v2)] == [
        (0, "create", 9), (1, "append", 12), (2, "overwrite", 2)
    ]  # fmt: skip
    assert {k: v for k, v in snapshot(location).items() if k.startswith(d0)} == before  # same inodes, bytes
    assert ids(0) == list(range(9)) and ids("first") == list(range(9))
    assert ids(1) == [*range(9), 100, 101, 102] and ids() == [200, 201]
    # an append links the previous version's files: same inode, no copy, no rewrite
    d1 = dal.open("cam.frames", 1).petastorm_url.rsplit("/", 1)[1] + "/"
    files = snapshot(location)
    v0_files = {k[len(d0) :]: v[0] for k, v in files.items() if k.startswith(d0) and k.endswith(".parquet")}
    v1_files = {k[len(d1) :]: v[0] for k, v in files.items() if k.startswith(d1) and k.endswith(".parquet")}
    assert v0_files.items() <= v1_files.items()
    # each version is recorded once, naming its directory; the directories are named by version
    assert sorted(os.listdir(os.path.join(location, "_dal_versions"))) == [f"{n:020d}.json" for n in range(3)]
    assert d0.startswith("v0-") and d1.startswith("v1-")
    assert [p.key for p in cat.partitions("cam.frames", 1)] == ["camera=cam0", "camera=cam1", "camera=cam2"]
    assert re.search(r"/cam\.frames/v1-[0-9a-f]{12}$", dal.open("cam.frames", 1).petastorm_url)
    decoded = dal.open("cam.frames", 0).to_numpy()
    assert decoded["depth"].shape == (9, 4, 4) and decoded["rgb"].shape == (9, 6, 8, 3)
    df = dal.open("cam.frames", 0).to_pandas()
    assert df["depth"].iloc[0].shape == (4, 4) and len(df) == 9


def test_bad_input_is_refused_before_anything_is_written(cat: Catalog) -> None:
    dal.write(frames(4), "cam.frames", format="petastorm", schema=SCHEMA)
    location = cat.get_dataset("cam.frames").location
    before = (snapshot(location), cat.versions("cam.frames"))
    bad_shape = frames(5)
    bad_shape[3]["depth"] = np.zeros((4, 5), np.float32)
    with pytest.raises(SchemaMismatch, match=r"field 'depth', row 3: expected shape \(4, 4\), got \(4, 5\)"):
        dal.write(bad_shape, "cam.frames", format="petastorm")
    bad_dtype = frames(3)
    bad_dtype[2]["rgb"] = np.zeros((6, 8, 3), np.float32)
    with pytest.raises(SchemaMismatch, match="field 'rgb', row 2: expected dtype uint8, got float32"):
        dal.write(bad_dtype, "cam.frames", format="petastorm")
    with pytest.raises(SchemaMismatch, match=r"missing \['rgb'\]"):
        dal.write([{k: v for k, v in r.items() if k != "rgb"} for r in frames(2)], "cam.frames", format="petastorm")
    nulls = frames(2)
    nulls[1]["depth"] = None
    with pytest.raises(SchemaMismatch, match="field 'depth', row 1: None"):
        dal.write(nulls, "cam.frames", format="petastorm")
    other = TensorSchema("Frames", [*SCHEMA.fields[:3], TensorField("rgb", np.uint8, (6, 8), ImageCodec("png"))])
    with pytest.raises(SchemaMismatch, match=r"changed \['rgb'\]"):
        dal.write(frames(1), "cam.frames", format="petastorm", schema=other)
    assert (snapshot(location), cat.versions("cam.frames")) == before
    with pytest.raises(dal.DalError, match="needs schema="):
        dal.write(frames(1), "cam.other", format="petastorm")
    assert [d.name for d in cat.list_datasets()] == ["cam.frames"]


def test_register_refuses_what_is_not_petastorm(cat: Catalog, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"a": [1]}), plain / "part-0.parquet")
    with pytest.raises(FormatError, match="no petastorm table"):
        dal.register("x.plain", str(plain), format="petastorm")
    pq.write_metadata(pa.schema([("a", pa.int64())]), plain / "_common_metadata")
    with pytest.raises(FormatError, match="no Petastorm schema.*format='parquet'"):
        dal.register("x.plain", str(plain), format="petastorm")
    assert cat.list_datasets() == []


def test_cli_shows_tensor_fields(cat: Catalog) -> None:
    dal.write(frames(2), "cam.frames", format="petastorm", schema=SCHEMA)
    out = CliRunner().invoke(cli, ["--catalog", cat.url, "schema", "cam.frames"]).stdout
    assert "float32[4, 4] (ndarray)" in out and "uint8[6, 8, 3] (image/png)" in out and "int64 (scalar)" in out


def _append(url: str, warehouse: str, start: int, go: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    os.environ["DAL_CATALOG_URL"], os.environ["DAL_WAREHOUSE"] = url, warehouse
    go.wait()
    for k in range(3):
        dal.write(frames(2, start + 10 * k), "cam.frames", format="petastorm")


def test_concurrent_appenders_both_land(cat: Catalog) -> None:
    dal.write(frames(1), "cam.frames", format="petastorm", schema=SCHEMA)
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    env = (os.environ["DAL_CATALOG_URL"], os.environ["DAL_WAREHOUSE"])
    procs = [ctx.Process(target=_append, args=(*env, start, go)) for start in (1000, 2000)]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0, 0]
    assert [v.number for v in cat.versions("cam.frames")] == list(range(7))
    assert ids() == sorted([0] + [s + 10 * k + j for s in (1000, 2000) for k in range(3) for j in range(2)])


KILLED = textwrap.dedent(
    """
    import sys, numpy as np, dal
    from tests.petastorm.test_petastorm_dataset import SCHEMA
    rows = [{"id": i, "camera": "cam0", "depth": np.zeros((4, 4), np.float32),
             "rgb": np.random.default_rng(i).integers(0, 255, (6, 8, 3)).astype(np.uint8)} for i in range(60_000)]
    dal.write(rows, "cam.frames", format="petastorm")
    """
)


def test_a_killed_writer_leaves_no_version(cat: Catalog, tmp_path: Path) -> None:
    dal.write(frames(3), "cam.frames", format="petastorm", schema=SCHEMA)
    location = cat.get_dataset("cam.frames").location
    script = tmp_path / "w.py"
    script.write_text(KILLED)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(repo)})
    deadline = time.monotonic() + 180
    while not any(n.startswith("v1-") for n in os.listdir(location)):
        assert proc.poll() is None, "the writer finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    # the killed write's directory is there, unrecorded: no reader or sync sees it
    assert len([n for n in os.listdir(location) if n.startswith("v1-")]) == 1
    assert os.listdir(os.path.join(location, "_dal_versions")) == [f"{0:020d}.json"]
    assert [v.number for v in cat.versions("cam.frames")] == [0] and ids() == [0, 1, 2]
    assert dal.sync("cam.frames") == []
    assert dal.write(frames(1, 50), "cam.frames", format="petastorm").number == 1
    assert ids() == [0, 1, 2, 50]


def test_arrow_tables_with_nested_lists_are_accepted(cat: Catalog) -> None:
    table = pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "camera": ["cam0", "cam1"],
        "depth": [np.full((4, 4), 1.5).tolist(), np.full((4, 4), 2.5).tolist()],
        "rgb": [np.full((6, 8, 3), 7).tolist(), np.full((6, 8, 3), 9).tolist()],
    })  # fmt: skip
    dal.write(table, "cam.arrow", format="petastorm", schema=SCHEMA)
    got = dal.open("cam.arrow").to_numpy()
    assert got["depth"].dtype == np.float32 and got["rgb"].dtype == np.uint8
    np.testing.assert_array_equal(got["rgb"][np.argsort(got["id"])][1], np.full((6, 8, 3), 9, np.uint8))


def test_plain_parquet_is_registered_explicitly(cat: Catalog, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    for day, n in (("2026-01-01", 3), ("2026-01-02", 2)):
        (plain / f"day={day}").mkdir(parents=True)
        pq.write_table(pa.table({"v": list(range(n))}), plain / f"day={day}" / "part-0.parquet")
    (v,) = dal.register("x.plain", str(plain), format="parquet")
    assert (v.row_count, v.file_count, v.partition_columns) == (5, 2, ("day",))
    rows = dal.open("x.plain").to_arrow().to_pylist()
    assert sorted((r["day"], r["v"]) for r in rows) == [
        ("2026-01-01", 0),
        ("2026-01-01", 1),
        ("2026-01-01", 2),
        ("2026-01-02", 0),
        ("2026-01-02", 1),
    ]
    with pytest.raises(dal.DalError, match="read-only"):
        dal.write(pa.table({"v": [1]}), "x.plain", format="parquet")


def test_partition_values_with_separators_round_trip(cat: Catalog) -> None:
    rows = frames(4)
    for r, cam in zip(rows, ["left/front", "rear 2%", "left/front", "rear 2%"], strict=True):
        r["camera"] = cam
    dal.write(rows, "cam.odd", format="petastorm", schema=SCHEMA, partition_by=["camera"])
    v0 = dal.open("cam.odd").petastorm_url.removeprefix("file://")
    assert sorted(d for d in os.listdir(v0) if not d.startswith("_")) == ["camera=left%2Ffront", "camera=rear%202%25"]
    got = dal.open("cam.odd").to_numpy(["id", "camera"])
    assert sorted(zip(got["id"].tolist(), got["camera"].tolist(), strict=True)) == [
        (0, "left/front"), (1, "rear 2%"), (2, "left/front"), (3, "rear 2%")
    ]  # fmt: skip
