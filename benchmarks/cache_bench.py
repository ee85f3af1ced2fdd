"""Requests and time per epoch over S3 (moto server on loopback, behind a counting proxy) with and without
``dal.open(…, cache="local")``.

    python benchmarks/cache_bench.py [--rows 300000] [--epochs 3]

Every request that reaches the server is logged by the proxy (method, key, response bytes): "data GET" is a
GET of a Parquet data file, "other GET" one of a log/manifest file. One Dataset per configuration, opened
once and read for several epochs (the footers planning reads in epoch 1 stay in its plan cache); then a
fresh ``dal.open`` with the warm cache (what the next run of a training script sees).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import dal  # noqa: E402
from tests.storage.s3_counter import Counter, counting_proxy  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dal-cache-bench-"))
    os.environ["DAL_HOME"] = str(work / "home")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        with counting_proxy(f"http://127.0.0.1:{port}", work / "requests.jsonl") as (endpoint, counter):
            run(endpoint, counter, work, args.rows, args.epochs)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def run(endpoint: str, counter: Counter, work: Path, n: int, epochs: int) -> None:
    import boto3

    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_REGION": "us-east-1"}  # fmt: skip
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                 region_name="us-east-1").create_bucket(Bucket="bench")  # fmt: skip
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {"id": np.arange(n), "day": np.arange(n) % 30, "label": rng.integers(0, 10, n),
         **{f"f{i}": rng.standard_normal(n) for i in range(16)}}
    )  # fmt: skip
    dal.write(df, "bench.cache", path="s3://bench/c", partition_by=["day"], storage_options=options)
    files = len(dal.open("bench.cache", storage_options=options).files())
    print(f"\n{n:,} rows, 19 columns, {files} Parquet files (Delta, 30 partitions) on S3 (moto via a counting proxy)\n")
    print("| read | cache | epoch | data GETs | data MB | HEAD | other GET / LIST | time (s) |")
    print("|---|---|---|---|---|---|---|---|")

    def full(ds: dal.Dataset) -> int:
        return sum(b.num_rows for b in ds.scan().iter_batches(65_536))

    def narrow(ds: dal.Dataset) -> int:
        return sum(b.num_rows for b in ds.select("id", "f0").filter("label = 3").iter_batches(65_536))

    for label, read in (("all columns", full), ("2 columns, label = 3", narrow)):
        rows = None
        for cached in (False, True):
            kw = {"cache": "local", "cache_dir": str(work / f"fc-{label[:3]}")} if cached else {}
            ds = dal.open("bench.cache", storage_options=options, **kw)  # type: ignore[arg-type]
            for e in range(1, epochs + 1):
                rows = report(counter, label, "local" if cached else "none", str(e), partial(read, ds), rows)
            if cached:
                again = dal.open("bench.cache", storage_options=options, **kw)  # type: ignore[arg-type]
                report(counter, label, "local", "fresh open", partial(read, again), rows)


def report(counter: Counter, label: str, cache: str, epoch: str, read: object, rows: int | None) -> int:
    mark = counter.mark()
    t = time.perf_counter()
    got = read()  # type: ignore[operator]
    took = time.perf_counter() - t
    time.sleep(0.2)  # the proxy logs before it answers; this is only for the last line of a burst
    s = Counter.summary(counter.since(mark))
    assert rows is None or got == rows, (got, rows)
    print(f"| {label} | {cache} | {epoch} | {s['data_gets']} | {s['data_bytes'] / 1e6:.2f} | {s['heads']} | "
          f"{s['other_gets']} / {s['lists']} | {took:.2f} |")  # fmt: skip
    return int(got)


if __name__ == "__main__":
    main()
