"""Forked DataLoader workers reading an S3 dataset without the file cache: each worker must use its own
connections. pyarrow's S3 client is not fork-safe: a child reading through the parent's pooled keep-alive
connections got another request's bytes ("Couldn't deserialize thrift" / "Failed to flush response
stream"). moto's server closes connections itself, so the keep-alive case runs behind the counting proxy,
as real S3 behaves."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import numpy as np
import pandas as pd
import pytest

import dal
from dal.catalog import Catalog
from tests.objectstores import SECRET
from tests.storage.s3_counter import counting_proxy


@pytest.mark.parametrize("via", ["moto", "keep-alive proxy"])
def test_forked_workers_read_s3_without_the_cache(
    sqlite_env: Catalog, s3_endpoint: str, via: str, tmp_path: Path
) -> None:
    if via == "moto":
        read_through_forked_workers(s3_endpoint)
        return
    with counting_proxy(s3_endpoint, tmp_path / "requests.jsonl") as (endpoint, _counter):
        read_through_forked_workers(endpoint)


def read_through_forked_workers(endpoint: str) -> None:
    torch = pytest.importorskip("torch")
    bucket = f"dal-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="AKIDTEST", aws_secret_access_key=SECRET,
                 region_name="us-east-1").create_bucket(Bucket=bucket)  # fmt: skip
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": SECRET,
               "AWS_REGION": "us-east-1"}  # fmt: skip
    n = 20_000
    df = pd.DataFrame({"id": np.arange(n), "part": np.arange(n) % 4, "f0": np.random.default_rng(0).random(n)})
    dal.write(df, "fork.s3", path=f"s3://{bucket}/t", partition_by=["part"], storage_options=options)
    scan = dal.open("fork.s3", storage_options=options).select("id", "f0").shuffle(seed=3)
    assert sum(b.num_rows for b in scan.iter_batches(4096)) == n  # the parent reads first: pooled connections
    data = scan.to_torch(1000)
    for loader in (torch.utils.data.DataLoader(data, batch_size=None, num_workers=2), data.loader(num_workers=2)):
        got = {int(i): float(f) for b in loader for i, f in zip(b["id"], b["f0"], strict=True)}
        assert sorted(got) == list(range(n))
        assert np.array_equal([got[i] for i in range(n)], df["f0"].to_numpy())
