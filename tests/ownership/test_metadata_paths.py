"""Paths a table's metadata names resolve under the table's root: a Delta add/remove/cdc/deletion-vector path or a
Petastorm record's directory and files that leave the root (``..``, encoded ``%2E%2E``, an absolute path
elsewhere, another bucket) is a ``FormatError`` naming the table and the entry, at register/sync and at every
read, and ``dal ui`` serves nothing from outside; an absolute path inside the root reads as before."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.errors import FormatError
from dal.storage import uris
from dal.storage.location import Location
from tests.conformance.conftest import CORPUS, require_corpus
from tests.ownership.canaries import S3Sandbox, Sandbox
from tests.ui.conftest import start

SECRET = "do-not-read"
SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2,), NdarrayCodec())]
)


def _commit(loc: Location, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE",
                           "operationParameters": {"mode": "Append"}}}  # fmt: skip
    loc.write(f"_delta_log/{version:020d}.json", "\n".join(json.dumps(a) for a in [info, *actions]).encode() + b"\n")


def _add(path: str, size: int) -> dict[str, Any]:
    return {"add": {"path": path, "size": size, "partitionValues": {}, "modificationTime": 1_700_000_000_000,
                    "dataChange": True, "stats": json.dumps({"numRecords": 3})}}  # fmt: skip


def clean_table(uri: str, options: dict[str, str] | None = None) -> Location:
    deltalake.write_deltalake(
        uri, pa.table({"secret": ["mine"] * 2}), storage_options=uris.object_store_options(options)
    )
    return Location.of(uri, options)


def secret_size(sb: Sandbox) -> int:
    return (sb.outside / "secret.parquet").stat().st_size


def assert_no_secret(table: pa.Table) -> None:
    assert SECRET not in table.column("secret").to_pylist()


@pytest.mark.parametrize(
    "hostile",
    [
        "../outside/secret.parquet",
        "%2E%2E/outside/secret.parquet",
        "sub/../../outside/secret.parquet",
        "{base}/outside/secret.parquet",
        "file://{base}/outside/secret.parquet",
    ],
    ids=["dotdot", "encoded", "nested", "absolute", "file-url"],
)
def test_delta_add_path_outside_the_root_is_refused_at_register(
    hostile: str, sqlite_env: Catalog, tmp_path: Path
) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    loc = clean_table(str(sb.base / "ds.delta"))
    _commit(loc, 1, [_add(hostile.format(base=sb.base), secret_size(sb))])
    with pytest.raises(
        FormatError, match=r"ds\.delta \(Delta version 1\): an add action's path names .*secret\.parquet"
    ):
        dal.register("h.d", str(sb.base / "ds.delta"))
    assert sqlite_env.list_datasets() == []


def test_delta_remove_and_deletion_vector_paths_outside_the_root_are_refused(
    sqlite_env: Catalog, tmp_path: Path
) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    loc = clean_table(str(sb.base / "ds.delta"))
    remove = {"remove": {"path": "../outside/secret.parquet", "deletionTimestamp": 1, "dataChange": True}}
    _commit(loc, 1, [remove])
    with pytest.raises(FormatError, match="a remove action's path names '../outside/secret.parquet'"):
        dal.register("h.d", str(sb.base / "ds.delta"))


def test_an_absolute_path_inside_the_root_reads_as_before(sqlite_env: Catalog, tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    root = sb.base / "ds.delta"
    loc = clean_table(str(root))
    shutil.copy(sb.outside / "secret.parquet", root / "copied.parquet")
    _commit(loc, 1, [_add(f"file://{root}/copied.parquet", secret_size(sb))])
    dal.register("h.d", str(root))
    got = sorted(dal.open("h.d").to_arrow().column("secret").to_pylist())
    # delta-rs joins every path under the root (it cannot read this version): the reference is its version 0
    # and the copied file read by pyarrow
    first = deltalake.DeltaTable(str(root), version=0).to_pyarrow_table().column("secret").to_pylist()
    assert got == sorted(first + pq.read_table(root / "copied.parquet").column("secret").to_pylist())


def test_a_log_edited_after_registration_is_refused_at_read_and_by_dal_ui(sqlite_env: Catalog, tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    root = sb.base / "ds.delta"
    loc = clean_table(str(root))
    dal.register("h.d", str(root))
    first = loc.read("_delta_log/00000000000000000000.json").decode().splitlines()
    edited = [
        json.dumps(_add("../outside/secret.parquet", secret_size(sb))) if '"add"' in line else line for line in first
    ]
    loc.write("_delta_log/00000000000000000000.json", ("\n".join(edited) + "\n").encode())
    with pytest.raises(FormatError, match=r"h\.d version 0 .*an add action's path names '../outside/secret.parquet'"):
        dal.open("h.d").to_arrow()
    server = start(sqlite_env.url, tmp_path)
    ui = next(server)
    try:
        status, _, body = ui.get("/api/datasets/h.d/preview")
        assert status >= 400 and SECRET.encode() not in body and b"outside" in body
        status, _, page = ui.get("/d/h.d/preview")
        assert status >= 400 and SECRET.encode() not in page
    finally:
        server.close()


def test_a_deletion_vector_outside_the_root_is_refused(sqlite_env: Catalog, tmp_path: Path) -> None:
    require_corpus()
    sb = Sandbox(tmp_path / "sandbox")
    root = sb.base / "dv.delta"
    shutil.copytree(CORPUS / "delta-golden" / "dv-partitioned-with-checkpoint", root)
    commit = root / "_delta_log" / "00000000000000000015.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
    from dal.formats.delta.log import deletion_vector_path

    for a in actions:
        dv = (a.get("add") or {}).get("deletionVector")
        if dv:  # moved outside the table, named by an absolute path (storage type "p")
            moved = sb.plant(sb.outside / "stolen.bin", (root / str(deletion_vector_path(dv))).read_bytes())
            (root / str(deletion_vector_path(dv))).unlink()
            dv.update(storageType="p", pathOrInlineDv=f"file://{moved}")
    commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    with pytest.raises(FormatError, match=r"Delta version 15\): an add action's deletion vector names .*stolen\.bin"):
        dal.register("h.dv", str(root))


# -- Petastorm -----------------------------------------------------------------------------------------------


def _petastorm(where: Path, name: str, ids: range) -> None:
    rows = [{"id": i, "x": np.full(2, i, np.float32)} for i in ids]
    dal.write(rows, name, format="petastorm", schema=SCHEMA, path=str(where))


@pytest.mark.parametrize("edit", ["directory", "file"])
def test_petastorm_record_naming_another_dataset_is_refused(edit: str, sqlite_env: Catalog, tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "sandbox")
    mine, other = sb.base / "mine.petastorm", sb.base / "other.petastorm"
    _petastorm(mine, "p.mine", range(3))
    _petastorm(other, "p.other", range(100, 105))  # a second dataset sharing the parent folder
    record = mine / "_dal_versions" / f"{0:020d}.json"
    body = json.loads(record.read_text())
    theirs = json.loads((other / "_dal_versions" / f"{0:020d}.json").read_text())
    if edit == "directory":
        body.update(directory=f"../other.petastorm/{theirs['directory']}", files=theirs["files"])
        what = 'its "directory" names'
    else:
        body["files"] = [
            {**f, "path": f"../../other.petastorm/{theirs['directory']}/{f['path']}"} for f in theirs["files"]
        ]
        what = "a file it lists names"
    record.write_text(json.dumps(body))
    with pytest.raises(FormatError, match=f"the version record _dal_versions/{0:020d}.json: {what}"):
        dal.open("p.mine").to_arrow()  # recorded before the edit: refused at read
    with pytest.raises(FormatError, match=what):
        dal.register("p.again", str(mine), format="petastorm", read_only=True, catalog=f"sqlite:///{tmp_path}/b.db")
    assert sorted(dal.open("p.other").to_arrow().column("id").to_pylist()) == list(range(100, 105))


# -- object storage ------------------------------------------------------------------------------------------


@pytest.fixture
def s3_tables(s3: tuple[str, dict[str, str]]) -> Iterator[tuple[S3Sandbox, str, dict[str, str]]]:
    bucket, options = s3
    yield S3Sandbox(bucket, options), f"s3://{bucket}/tables/t.delta", options


@pytest.mark.parametrize("hostile", ["../../{victim}/private/secret.parquet", "s3://{victim}/private/secret.parquet",
                                     "s3a://{victim}/private/secret.parquet", "%2E%2E/%2E%2E/{victim}/private/secret.parquet"])  # fmt: skip
def test_a_table_in_one_bucket_never_reads_another(
    hostile: str, s3_tables: tuple[S3Sandbox, str, dict[str, str]], sqlite_env: Catalog
) -> None:
    sb, uri, options = s3_tables
    loc = clean_table(uri, options)
    size = sb.client.head_object(Bucket=sb.victim, Key="private/secret.parquet")["ContentLength"]
    _commit(loc, 1, [_add(hostile.format(victim=sb.victim), size)])
    with pytest.raises(FormatError, match=r"an add action's path names .*private/secret\.parquet"):
        dal.register("h.s3", uri, storage_options=options)
    assert sb.touched() == []


def test_petastorm_record_pointing_at_another_bucket_is_refused(
    s3_tables: tuple[S3Sandbox, str, dict[str, str]], sqlite_env: Catalog
) -> None:
    sb, uri, options = s3_tables
    where = uri.replace("t.delta", "p.petastorm")
    rows = [{"id": i, "x": np.full(2, i, np.float32)} for i in range(3)]
    dal.write(rows, "p.s3", format="petastorm", schema=SCHEMA, path=where, storage_options=options)
    loc = Location.of(where, options)
    body = json.loads(loc.read(f"_dal_versions/{0:020d}.json"))
    size = sb.client.head_object(Bucket=sb.victim, Key="private/secret.parquet")["ContentLength"]
    body.update(directory=f"../../../{sb.victim}/private")
    body["files"] = [{"path": "secret.parquet", "size": size, "rows": 3, "row_groups": 1}]
    loc.write(f"_dal_versions/{0:020d}.json", json.dumps(body).encode())
    with pytest.raises(FormatError, match='its "directory" names'):
        dal.open("p.s3", storage_options=options).to_arrow()
    assert sb.touched() == []
