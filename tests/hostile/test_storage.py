"""Object stores without credentials fail fast (issue #22: ``dal register X gs://…`` with no credentials hung for
over a minute on the instance-metadata endpoint); S3's check is in tests/cli/test_hostile.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dal
from dal.errors import DalError
from dal.storage import uris
from tests.objectstores import free_port


def _no_google(monkeypatch: pytest.MonkeyPatch, home: Path, metadata: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_"))}
    env |= {"HOME": str(home), "GCE_METADATA_HOST": metadata}
    for k in list(os.environ):
        if k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GCE_METADATA_HOST", metadata)
    return env


def test_register_on_gcs_without_credentials_fails_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _no_google(monkeypatch, tmp_path, f"127.0.0.1:{free_port()}")  # a closed loopback port
    proc = subprocess.run(
        [sys.executable, "-m", "dal.cli", "--catalog", f"sqlite:///{tmp_path}/c.db", "register", "x.y",
         "gs://bucket/path"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1 and proc.stderr.startswith("dal: error: no GCS credentials for gs://bucket/path")
    assert "GOOGLE_APPLICATION_CREDENTIALS" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    started = time.monotonic()  # in this process: the interpreter's start-up is not the register's time
    with pytest.raises(DalError, match="no GCS credentials"):
        dal.register("x.y", "gs://bucket/path", catalog=f"sqlite:///{tmp_path}/c.db")
    assert time.monotonic() - started < 10


def test_any_credential_source_passes_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_google(monkeypatch, tmp_path, f"127.0.0.1:{free_port()}")
    uris.check_credentials("s3://bucket/t", {})  # not GCS: its own check
    uris.check_credentials("/local/path", {})
    uris.check_credentials("gs://bucket/t", {"google_service_account": str(tmp_path / "key.json")})
    uris.check_credentials("gs://bucket/t", {"GOOGLE_SKIP_SIGNATURE": "true"})
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "key.json"))
    uris.check_credentials("gs://bucket/t", {})
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS")
    adc = tmp_path / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text("{}")
    uris.check_credentials("gs://bucket/t", {})
    adc.unlink()
    with socket.socket() as metadata:  # a metadata server that answers: on Google Cloud
        metadata.bind(("127.0.0.1", 0))
        metadata.listen()
        monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{metadata.getsockname()[1]}")
        uris.check_credentials("gs://bucket/t", {})
