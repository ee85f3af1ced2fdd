"""Requests against S3 (moto server on loopback): a projected, filtered read vs a full read, for a Delta
and a Petastorm dataset holding the same rows.

    python benchmarks/s3_bench.py

Counts the GET requests the server logs while each read runs (a fresh Dataset each time, so footer reads
for planning are included) and reports the compressed column-chunk bytes each plan reads.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dal  # noqa: E402


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="dal-s3-bench-"))
    os.environ["DAL_HOME"] = str(work / "home")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(work / "moto.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        import boto3

        endpoint = f"http://127.0.0.1:{port}"
        options = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1",
        }
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket="bench")
        rng = np.random.default_rng(0)
        n = 300_000
        ts = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(np.sort(rng.integers(0, 30 * 86400, n)), unit="s")
        df = pd.DataFrame(
            {
                "id": np.arange(n),
                "ts": ts,
                "date": ts.strftime("%Y-%m-%d"),
                "label": rng.integers(0, 10, n),
                **{f"f{i}": rng.standard_normal(n) for i in range(16)},
            }
        )
        dal.write(
            df, "bench.s3", path="s3://bench/s3", partition_by=["date"], time_column="ts", storage_options=options
        )

        ansi = re.compile(r"\x1b\[[0-9;]*m")  # werkzeug colours lines by status (206 range reads, 404s)

        def requests() -> tuple[int, int]:
            text = ansi.sub("", (work / "moto.log").read_text())
            return text.count('"GET '), text.count('"HEAD ')

        def gets(run) -> tuple[int, int, int]:  # type: ignore[no-untyped-def]
            g0, h0 = requests()
            rows = run()
            time.sleep(0.5)  # let the server finish logging
            g1, h1 = requests()
            return g1 - g0, h1 - h0, rows

        def narrow() -> int:
            scan = (
                dal.open("bench.s3", storage_options=options)
                .select("id", "f0")
                .filter("label = 3")
                .window("2026-01-10", "2026-01-11")
            )
            return sum(b.num_rows for b in scan.iter_batches())

        def petastorm_narrow() -> int:
            scan = (
                dal.open("bench.pt", storage_options=options)
                .select("id", "f0")
                .filter("label = 3 AND date = '2026-01-10'")
            )
            return sum(b.num_rows for b in scan.iter_batches())

        # the same rows as a Petastorm dataset (scalar fields, partitioned by date; ts as epoch seconds)
        from dal import ScalarCodec, TensorField, TensorSchema

        pt = df.assign(ts=df.ts.astype("int64") // 10**9)
        schema = TensorSchema("Bench", [TensorField(c, np.dtype(pt[c].dtype).type if c != "date" else np.str_, (),
                                                    ScalarCodec()) for c in pt.columns])  # fmt: skip
        dal.write(pt, "bench.pt", path="s3://bench/pt", format="petastorm", schema=schema, partition_by=["date"],
                  storage_options=options)  # fmt: skip

        print(f"\n{n:,} rows, 20 columns, 30 day partitions on S3 (moto server)\n")
        print(
            "| format | read (fresh Dataset: planning included) | rows | files | GET | HEAD | column-chunk bytes planned |"
        )
        print("|---|---|---|---|---|---|---|")
        for fmt, name, narrow_run, narrow_label, narrow_scan in (
            ("Delta", "bench.s3", narrow, "2 columns, label = 3, 1-day window",
             lambda d: d.select("id", "f0").filter("label = 3").window("2026-01-10", "2026-01-11")),
            ("Petastorm", "bench.pt", petastorm_narrow, "2 columns, label = 3 AND date = one day",
             lambda d: d.select("id", "f0").filter("label = 3 AND date = '2026-01-10'")),
        ):  # fmt: skip
            ds = dal.open(name, storage_options=options)
            full_bytes = ds.scan().bytes_planned()
            narrow_bytes = narrow_scan(ds).bytes_planned()

            def full_run(name: str = name) -> int:
                return sum(b.num_rows for b in dal.open(name, storage_options=options).iter_batches())

            g_full, h_full, r_full = gets(full_run)
            g_narrow, h_narrow, r_narrow = gets(narrow_run)
            files = len(ds.files())
            print(f"| {fmt} | full scan | {r_full:,} | {files} | {g_full} | {h_full} | {full_bytes / 1e6:.1f} MB |")
            print(f"| {fmt} | {narrow_label} | {r_narrow:,} | {files} | {g_narrow} | {h_narrow} | "
                  f"{narrow_bytes / 1e6:.2f} MB |")  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
