"""Rust panics (pyo3's ``PanicException``, a ``BaseException`` that escapes ``except Exception``): a credential
with a control character made object_store panic on its HTTP header (issue #22). Such values are refused as a
``DalError`` naming the option (never its value) before any client sees them, from ``storage_options`` or the
environment; a panic that still happens is a ``DalError`` without the panic's text."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError, is_panic, translated

TOKEN = "a\x01b-SECRETTOKEN"


@pytest.mark.parametrize(
    "option, value, what",
    [
        ("AWS_SESSION_TOKEN", TOKEN, "a control"),
        ("AWS_SESSION_TOKEN", "t\u00f6k-SECRETTOKEN", "a non-ASCII"),
        ("aws_secret_access_key", "x\ny-SECRETTOKEN", "a control"),
        ("AWS_REGION", "us-east-1\r\nX-SECRETTOKEN: 1", "a control"),
    ],
)
def test_header_breaking_options_are_refused(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], option: str, value: str, what: str
) -> None:
    bucket, options = s3
    dal.write(pa.table({"a": [1]}), "s.x", path=f"s3://{bucket}/t", storage_options=options)
    bad = {**options, option: value}
    calls = (
        lambda: dal.open("s.x", storage_options=bad).to_arrow(),
        lambda: dal.register("s.y", f"s3://{bucket}/t", storage_options=bad),
        lambda: dal.write(pa.table({"a": [2]}), "s.x", storage_options=bad),
    )
    for call in calls:
        with pytest.raises(
            DalError, match=rf"storage option {option} \(from storage_options\) has {what} character"
        ) as e:
            call()
        assert "SECRETTOKEN" not in str(e.value)
    assert dal.open("s.x", storage_options=options).count() == 1


def test_a_bad_token_in_the_environment_is_refused_without_a_panic(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]]
) -> None:
    bucket, options = s3
    dal.write(pa.table({"a": [1]}), "s.x", path=f"s3://{bucket}/t", storage_options=options)
    code = f"""
        import os, dal
        os.environ["AWS_SESSION_TOKEN"] = {TOKEN!r}
        try:
            dal.open("s.x", catalog={sqlite_env.url!r}, storage_options={options!r}).to_arrow()
        except BaseException as e:
            print(type(e).__name__, str(e))
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("DalError storage option AWS_SESSION_TOKEN (from the environment) has a control")
    assert "SECRETTOKEN" not in proc.stdout + proc.stderr and "panicked" not in proc.stderr


def test_a_panic_is_a_dal_error_without_its_text(sqlite_env: Catalog, s3: tuple[str, dict[str, str]]) -> None:
    """delta-rs itself, given the token dal refuses: the panic it raises is what ``translated`` turns into a
    ``DalError`` (were a later delta-rs to raise an ordinary error instead, that is no escape either)."""
    from deltalake import DeltaTable

    bucket, options = s3
    dal.write(pa.table({"a": [1]}), "s.x", path=f"s3://{bucket}/t", storage_options=options)
    try:
        DeltaTable(f"s3://{bucket}/t", storage_options={**options, "AWS_SESSION_TOKEN": TOKEN}).to_pyarrow_table()
    except BaseException as e:
        if not is_panic(e):
            assert isinstance(e, Exception), type(e)
            return
        with pytest.raises(DalError, match="stopped on an internal error") as caught, translated("opening s3://b/t"):
            raise e
        assert "SECRETTOKEN" not in str(caught.value) and "unwrap" not in str(caught.value)
