"""Object-storage servers for tests (a pytest plugin, see tests/conftest.py): a real S3 API (moto in server mode),
Azurite and a GCS emulator on loopback, one per session, and a fresh bucket or container per test."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

SECRET = f"sk-{uuid.uuid4().hex}"  # a value that must never reach the catalog


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(command: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    """Run a server on 127.0.0.1:``port`` until the block ends (killed: node ignores SIGTERM while it holds
    connections)."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, f"{command[0]} did not start"
                time.sleep(0.2)
        yield
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    with serving([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def s3(s3_endpoint: str) -> tuple[str, dict[str, str]]:
    """A fresh bucket and the storage options to reach it."""
    import boto3

    bucket = f"dal-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    options = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "AKIDTEST",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
    }
    return bucket, options


def frame(n: int, start: int = 0) -> pd.DataFrame:
    ts = pd.date_range("2026-01-01", periods=n, freq="h", tz="UTC") + pd.Timedelta(hours=start)
    return pd.DataFrame(
        {"id": range(start, start + n), "ts": ts, "date": ts.strftime("%Y-%m-%d"), "x": [i / 2 for i in range(n)]}
    )


REPO = Path(__file__).resolve().parents[1]
AZURITE = REPO / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
AZURE_ACCOUNT = "dalacct"
AZURE_KEY = base64.b64encode(f"{SECRET}-azure-key".encode()).decode()  # a secret the catalog must never see


@pytest.fixture(scope="session")
def azure_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Azurite (Microsoft's Azure Blob Storage emulator, from npm; ``make test`` installs it) on loopback."""
    binary = str(AZURITE) if AZURITE.exists() else shutil.which("azurite-blob")
    if binary is None:
        pytest.skip("azurite is not installed (make test installs it with npm into .cache/azurite)")
    port = free_port()
    data = tmp_path_factory.mktemp("azurite")
    command = [binary, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(data),
               "--skipApiVersionCheck", "--loose", "--silent"]  # fmt: skip
    with serving(command, port, {**os.environ, "AZURITE_ACCOUNTS": f"{AZURE_ACCOUNT}:{AZURE_KEY}"}):
        yield f"http://127.0.0.1:{port}/{AZURE_ACCOUNT}"


@pytest.fixture
def azure(azure_endpoint: str) -> tuple[str, dict[str, str]]:
    """A fresh container and the storage options to reach it (delta-rs / object_store key names)."""
    import pyarrow.fs as pafs

    container = f"dal-{uuid.uuid4().hex[:12]}"
    options = {
        "AZURE_STORAGE_ACCOUNT_NAME": AZURE_ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": AZURE_KEY,
        "AZURE_STORAGE_ENDPOINT": azure_endpoint,
    }
    authority = azure_endpoint.split("//", 1)[1].split("/", 1)[0]
    fs = pafs.AzureFileSystem(
        account_name=AZURE_ACCOUNT, account_key=AZURE_KEY, blob_storage_authority=authority,
        blob_storage_scheme="http", dfs_storage_authority=authority, dfs_storage_scheme="http",
    )  # fmt: skip
    fs.create_dir(container)
    return container, options


@pytest.fixture(scope="session")
def gcs_endpoint() -> Iterator[str]:
    """gcp-storage-emulator (pip, JSON API only) on loopback, in memory."""
    script = Path(sys.executable).parent / "gcp-storage-emulator"
    if not script.exists():
        pytest.skip("gcp-storage-emulator is not installed (it is in the dev group)")
    port = free_port()
    with serving([str(script), "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"], port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def gcs(gcs_endpoint: str) -> tuple[str, dict[str, str]]:
    """A fresh bucket and the storage options to reach it."""
    import json
    import urllib.request

    bucket = f"dal-{uuid.uuid4().hex[:12]}"
    request = urllib.request.Request(
        f"{gcs_endpoint}/storage/v1/b?project=test",
        data=json.dumps({"name": bucket}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=10).close()
    return bucket, {"google_base_url": gcs_endpoint, "google_skip_signature": "true"}
