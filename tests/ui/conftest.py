"""A real ``dal ui`` server over a populated catalog (SQLite and PostgreSQL), started as a subprocess on a free
port: the API and browser tests talk to it over HTTP like a user's browser would."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa

import dal
from dal import ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog, Field, Partition, Schema, VersionDraft
from tests.conftest import PG_URL, _pg_available, _pg_schema_url
from tests.objectstores import free_port

HOSTILE = "<script>alert('x')</script>\"><img src=x onerror=alert(1)>"
SECRET_LOCATION = "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/raw?X-Amz-Signature=deadbeefsecret&sig=sassecret"
SECRETS = ("wJalrXUtnFEMI", "deadbeefsecret", "sassecret", "pgsecretpw")
FILLER = 120  # enough datasets for three pages of 50
NAMED = 5  # datasets besides the filler
VALUE_COMMENT = "Reflectivity in <i>dBZ</i>"  # weather.radar's column description (shown as text, never markup)


@dataclass(frozen=True)
class Server:
    base: str
    catalog_url: str
    token: str | None = None

    def get(
        self, path: str, *, headers: dict[str, str] | None = None, method: str = "GET"
    ) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(self.base + path, headers=headers or {}, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def json(self, path: str, *, method: str = "GET") -> tuple[int, Any]:
        status, _, body = self.get(path, method=method)
        return status, json.loads(body)


def populate(url: str, warehouse: Path) -> None:
    """Real tables written by dal (Delta with partitions and a schema change, Petastorm with tensors), a dataset
    with hostile text and a credential-bearing location (as an older dal might have stored), and filler."""
    cat = Catalog(url)
    for i in range(3):
        n = 40 * (i + 1)
        cols: dict[str, Any] = {
            "date": [f"2026-03-0{1 + j % (i + 1)}" for j in range(n)],
            "station": [f"st{j % 7}" for j in range(n)],
            "value": [float(j) for j in range(n)],
        }
        if i == 2:
            cols["quality"] = [j % 3 for j in range(n)]
        table = pa.table(cols)
        value = table.schema.field("value").with_metadata({"comment": VALUE_COMMENT})  # a Delta column comment
        dal.write(
            table.cast(table.schema.set(table.schema.get_field_index("value"), value)),
            "weather.radar",
            partition_by=["date"],
            description="Radar scans <b>hourly</b>",
            schema_mode="merge" if i == 2 else None,
            path=str(warehouse / "radar"),
            catalog=cat,
        )
    cat.tag("weather.radar", 1, "prod")
    schema = TensorSchema(
        "Scans",
        [
            TensorField("id", np.int32, (), ScalarCodec()),
            TensorField("matrix", np.float32, (3, 4), NdarrayCodec()),
            TensorField("thumb", np.uint8, (8, 8, 3), ImageCodec("png")),  # shown as <img> in the preview
        ],
    )
    rng = np.random.default_rng(0)
    rows = [{"id": i, "matrix": rng.standard_normal((3, 4)).astype(np.float32), "thumb": thumb(i)} for i in range(8)]
    dal.write(rows, "vision.scans", format="petastorm", schema=schema, path=str(warehouse / "scans"), catalog=cat)
    cat.create_dataset(
        "evil.ds", format="parquet", location=SECRET_LOCATION, description=HOSTILE, owner=HOSTILE,
        properties={"note": HOSTILE},
    )  # fmt: skip
    cat.publish(
        "evil.ds",
        VersionDraft(
            "create", Schema((Field("x<y>", "int64"), Field("p", "string"))), row_count=1, committed_at=datetime(2026, 1, 1, tzinfo=UTC),
            partition_columns=("p",), partitions=(Partition((("p", HOSTILE),), 1, 1, 10),),
        ),
    )  # fmt: skip
    street_scenes(cat)
    for i in range(FILLER):
        cat.create_dataset(f"filler.ds_{i:03d}", format="delta", location=f"/nowhere/filler/{i}", description="filler")
    cat.create_dataset("odd.under_score", format="delta", location="/nowhere/odd", description="100% pure")
    # labels (dal label): on datasets and on a column (tests/ui/test_labels.py)
    cat.label("weather.radar", "gold")
    cat.label("weather.radar", "pii", column="station")
    cat.label("vision.street_scenes", "gold")
    cat.label("vision.street_scenes", "domain=vision")
    cat.close()


THUMB_COLOUR = (0xE4, 0x57, 0x2E)  # row 0's thumbnail: one colour, to find on a screenshot


def thumb(i: int) -> np.ndarray:
    """An 8x8 RGB image: row 0 all THUMB_COLOUR, the others a gradient."""
    if i == 0:
        return np.broadcast_to(np.array(THUMB_COLOUR, np.uint8), (8, 8, 3)).copy()
    return (np.arange(8 * 8 * 3, dtype=np.uint16).reshape(8, 8, 3) * (i + 1) % 256).astype(np.uint8)


EXPIRED = (0, 1, 2)  # versions of vision.street_scenes expired (as dal gc marks them)


def street_scenes(cat: Catalog) -> None:
    """A catalog-only dataset with tensor fields and a longer history (the README's screenshot)."""
    cat.create_dataset(
        "vision.street_scenes", format="petastorm", location="s3://ml-data/vision/street_scenes",
        description="Dash-cam frames with lane masks and CLIP embeddings, partitioned by capture date",
        owner="perception-team", time_column="captured_at",
    )  # fmt: skip
    base = (
        Field("frame_id", "int64", False),
        Field("captured_at", "timestamp[us, tz=UTC]", False),
        Field("date", "string"),
        Field("image", "binary", True, "uint8", (720, 1280, 3), "jpeg"),
        Field("lane_mask", "binary", True, "uint8", (720, 1280), "png"),
    )
    for v in range(12):
        fields = base + ((Field("embedding", "binary", True, "float32", (512,), "ndarray"),) if v >= 7 else ())
        days = 3 + v
        parts = tuple(
            Partition(
                (("date", f"2026-02-{d + 1:02d}"),), 9_000 + 700 * ((d * 7) % 5), 4, (180 + 40 * ((d * 7) % 5)) << 20
            )
            for d in range(days)
        )
        cat.publish(
            "vision.street_scenes",
            VersionDraft(
                "append" if v else "create", Schema(fields), row_count=sum(p.row_count for p in parts),
                file_count=sum(p.file_count for p in parts), size_bytes=sum(p.size_bytes for p in parts),
                committed_at=datetime(2026, 2, 1 + v, 6, tzinfo=UTC), partition_columns=("date",), partitions=parts,
                tags=("prod",) if v == 9 else ("staging",) if v == 11 else (),
            ),
        )  # fmt: skip
    cat.expire_versions("vision.street_scenes", EXPIRED, "expired by dal gc (keep_last=9); its files were deleted")


def start(
    url: str, tmp: Path, *, token: str | None = None, extra_env: dict[str, str] | None = None
) -> Iterator[Server]:
    port = free_port()
    args = [sys.executable, "-m", "dal.cli", "--catalog", url, "ui", "--port", str(port)]
    if token:
        args += ["--token", token]
    env = {**os.environ, "DAL_WAREHOUSE": str(tmp / "warehouse"), **(extra_env or {})}
    log = open(tmp / f"ui-{port}.log", "w+")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    server = Server(f"http://127.0.0.1:{port}", url, token)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"dal ui did not start (exit {proc.poll()}): {log.read()[-3000:]}")
                time.sleep(0.1)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui_sqlite")
    url = f"sqlite:///{tmp}/catalog.db"
    populate(url, tmp / "warehouse")
    yield from start(url, tmp)


@pytest.fixture(scope="module")
def pg_server_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    problem = _pg_available()
    if problem:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(problem)
        pytest.skip(problem)
    tmp = tmp_path_factory.mktemp("ui_pg")
    schema = f"dal_test_{uuid.uuid4().hex[:12]}"
    eng = sa.create_engine(PG_URL)
    with eng.begin() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        # trust auth ignores the password: it is here to check that no page or response shows it
        url = _pg_schema_url(schema).replace("://postgres@", "://postgres:pgsecretpw@", 1)
        populate(url, tmp / "warehouse")
        yield from start(url, tmp)
    finally:
        with eng.begin() as c:
            c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        eng.dispose()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest) -> Server:
    return request.getfixturevalue("sqlite_server" if request.param == "sqlite" else "pg_server_ui")  # type: ignore[no-any-return]


FORGED_PROGRAM = "/jobs/run.py?token=lineagesecret"  # a credential in a record another tool wrote


def populate_lineage(url: str, warehouse: Path) -> None:
    """A chain ``chain.a → chain.b → chain.c`` written through ``dal.open``/``dal.write`` (lineage recorded by dal
    itself), and a version whose lineage record (as a foreign writer might have stored it) is hostile text."""
    from dal import lineage
    from dal.catalog.types import Input

    cat = Catalog(url)
    lineage.clear_read_log()  # reads earlier tests in this process made must not become upstream here
    try:
        table = pa.table({"x": [1, 2, 3]})
        dal.write(table, "chain.a", path=str(warehouse / "a"), catalog=cat)
        dal.open("chain.a", catalog=cat)
        dal.write(table, "chain.b", description=HOSTILE, path=str(warehouse / "b"), catalog=cat)
        lineage.clear_read_log()
        dal.open("chain.b", 0, catalog=cat)
        dal.write(table, "chain.c", path=str(warehouse / "c"), catalog=cat)
        lineage.clear_read_log()
        dal.write(table, "twice.src", path=str(warehouse / "src"), catalog=cat)
        src = dal.open("twice.src", 0, catalog=cat)  # one upstream version, read through two filters
        dal.write(table, "chain.twice", path=str(warehouse / "twice"), catalog=cat,
                  inputs=[src.filter("x > 1"), src.filter("x < 3")])  # fmt: skip
        lineage.clear_read_log()
        lineage.clear_read_log()
        dal.write(table, "chain.forged", path=str(warehouse / "forged"), catalog=cat)
        cat.record_lineage(  # the record as a foreign writer might have stored it; the one edge a write would
            "chain.forged", 0, lineage.KEY,
            {"user": HOSTILE, "host": HOSTILE, "time": "2026-01-01T00:00:00+00:00", "program": FORGED_PROGRAM,
             "git": {"commit": HOSTILE, "dirty": True}, "spark": {"application_id": HOSTILE, "master": SECRET_LOCATION},
             "upstream": [{"dataset": HOSTILE, "version": 1, "filters": HOSTILE}, {"dataset": "chain.c", "version": 0}]},
            [Input("chain.c", 0)],
        )  # fmt: skip
    finally:
        lineage.clear_read_log()
        cat.close()


@pytest.fixture(scope="module")
def lineage_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("ui_lineage")
    url = f"sqlite:///{tmp}/catalog.db"
    populate_lineage(url, tmp / "warehouse")
    yield from start(url, tmp)
