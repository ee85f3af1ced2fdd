"""Load check of ``dal ui``: list and search latency over a catalog of 10,000 datasets x 100 versions.

Fills a fresh catalog (SQLite file, and a fresh schema on the PostgreSQL server) with SQLAlchemy core bulk
inserts (1M version rows), starts the real server (``dal ui`` in a subprocess) and times each endpoint with
sequential keep-alive requests: p50 / p95 / max in milliseconds.

    .venv/bin/python benchmarks/ui_load.py                       # both backends, 10,000 x 100
    .venv/bin/python benchmarks/ui_load.py --datasets 1000 --versions 10 --backends sqlite
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from dal.catalog import Catalog
from dal.catalog.models import DatasetRow, SchemaFieldRow, SchemaRow, TagRow, VersionRow

PG_URL = os.environ.get("DAL_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
CHUNK = 20_000
FIELDS = (("id", "int64", None, None, None), ("ts", "timestamp[us, tz=UTC]", None, None, None),
          ("label", "string", None, None, None), ("image", "binary", "uint8", [224, 224, 3], "png"),
          ("embedding", "binary", "float32", [512], "ndarray"))  # fmt: skip


def fill(url: str, datasets: int, versions: int) -> float:
    """Create the catalog tables and bulk-insert ``datasets`` x ``versions``; returns the seconds it took."""
    Catalog(url).close()  # creates the tables (alembic head)
    engine = sa.create_engine(url)
    t0 = time.perf_counter()
    base = datetime(2025, 1, 1, tzinfo=UTC)
    with engine.begin() as c:
        c.execute(
            sa.insert(DatasetRow.__table__),
            [
                {
                    "id": i + 1,
                    "name": f"team{i % 100:02d}.ds_{i:05d}",
                    "format": ("delta", "petastorm", "parquet")[i % 3],
                    "location": f"s3://bucket/warehouse/ds_{i:05d}",
                    "description": f"synthetic dataset {i} for the load check, owned by t{i % 100:02d}",
                    "owner": f"user{i % 37}",
                    "time_column": "ts",
                    "current_version": versions - 1,
                    "properties": {},
                    "created_at": base,
                    "updated_at": base + timedelta(minutes=i),
                }
                for i in range(datasets)
            ],
        )
        c.execute(
            sa.insert(SchemaRow.__table__),
            [{"id": i + 1, "dataset_id": i + 1, "fingerprint": f"{i:064x}"} for i in range(datasets)],
        )
        c.execute(
            sa.insert(SchemaFieldRow.__table__),
            [
                {
                    "schema_id": i + 1,
                    "position": p,
                    "name": n,
                    "type": t,
                    "nullable": True,
                    "dtype": d,
                    "shape": s,
                    "codec": k,
                }
                for i in range(datasets)
                for p, (n, t, d, s, k) in enumerate(FIELDS)
            ],
        )

        def version_rows() -> Iterator[dict[str, object]]:
            for i in range(datasets):
                for v in range(versions):
                    yield {
                        "id": i * versions + v + 1,
                        "dataset_id": i + 1,
                        "number": v,
                        "created_at": base + timedelta(hours=v, minutes=i),
                        "recorded_at": base + timedelta(hours=v, minutes=i),
                        "operation": "append" if v else "create",
                        "row_count": 1000 * (v + 1),
                        "file_count": v + 1,
                        "size_bytes": 1_000_000 * (v + 1),
                        "storage_version": v,
                        "schema_id": i + 1,
                        "partition_columns": [],
                        "properties": {},
                    }

        chunk: list[dict[str, object]] = []
        for row in version_rows():
            chunk.append(row)
            if len(chunk) == CHUNK:
                c.execute(sa.insert(VersionRow.__table__), chunk)
                chunk = []
        if chunk:
            c.execute(sa.insert(VersionRow.__table__), chunk)
        c.execute(
            sa.insert(TagRow.__table__),
            [
                {"dataset_id": i + 1, "name": "prod", "version_id": i * versions + 1, "created_at": base}
                for i in range(datasets)
            ],
        )
        if engine.dialect.name == "postgresql":
            for table in ("dal_datasets", "dal_schemas", "dal_schema_fields", "dal_versions", "dal_tags"):
                c.execute(
                    # the table names are the constants above, not user input
                    sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")  # noqa: S608
                )
    with engine.begin() as c:
        c.execute(sa.text("ANALYZE"))  # planner statistics, as a catalog in use would have
    engine.dispose()
    return time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(url: str) -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "dal.cli", "--catalog", url, "ui", "--port", str(port)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"dal ui did not start (exit {proc.poll()})") from None
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def timings(port: int, path: str, n: int) -> tuple[float, float, float, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    samples = []
    size = 0
    for i in range(n + 2):
        t0 = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        elapsed = (time.perf_counter() - t0) * 1000
        if r.status != 200:
            raise SystemExit(f"{path}: HTTP {r.status}: {body[:300]!r}")
        if i >= 2:  # two warm-up requests
            samples.append(elapsed)
        size = len(body)
    conn.close()
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95, samples[-1], size


def endpoints(datasets: int) -> list[str]:
    middle = f"team{(datasets // 2) % 100:02d}.ds_{datasets // 2:05d}"
    last_page = max(1, -(-datasets // 50))
    return [
        "/api/datasets",
        f"/api/datasets?page={last_page // 2}",
        f"/api/datasets?page={last_page}",
        "/api/datasets?q=t42",  # substring of name or description: ~1% of datasets
        "/api/datasets?q=ds_0424",  # a few names
        "/api/datasets?q=team07.*",  # glob on the name
        "/api/datasets?q=nothing-matches-this",
        "/?q=t42",
        "/",
        f"/api/datasets/{middle}",
        f"/api/datasets/{middle}/versions",
        f"/d/{middle}",
    ]


def run(backend: str, datasets: int, versions: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        schema = f"dal_bench_ui_{uuid.uuid4().hex[:8]}"
        if backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / 'catalog.db'}"
        else:
            eng = sa.create_engine(PG_URL)
            with eng.begin() as c:
                c.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            sep = "&" if "?" in PG_URL else "?"
            url = f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
        try:
            seconds = fill(url, datasets, versions)
            print(f"\n{backend}: {datasets:,} datasets x {versions} versions = {datasets * versions:,} version rows "
                  f"loaded in {seconds:.1f} s; {n} sequential requests per endpoint")  # fmt: skip
            print(f"{'endpoint':48} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'bytes':>9}")
            with server(url) as port:
                for path in endpoints(datasets):
                    p50, p95, worst, size = timings(port, path, n)
                    print(f"{path:48} {p50:8.1f} {p95:8.1f} {worst:8.1f} {size:9,}", flush=True)
        finally:
            if backend == "postgres":
                with eng.begin() as c:
                    c.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
                eng.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", type=int, default=10_000)
    ap.add_argument("--versions", type=int, default=100)
    ap.add_argument("--requests", type=int, default=40, help="timed requests per endpoint")
    ap.add_argument("--backends", default="sqlite,postgres")
    args = ap.parse_args()
    for backend in args.backends.split(","):
        run(backend.strip(), args.datasets, args.versions, args.requests)


if __name__ == "__main__":
    main()
