"""Hostile and unlucky input (issue 11): credentials in URLs are never stored or printed, names are matched in
full, user text cannot drive the terminal, and every failure is one ``dal: error:`` line — checked through the
Python API, click's runner and the real ``dal`` console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.catalog.types import validate_name, validate_tag
from dal.catalog.urls import has_credentials, mask_text, mask_url
from dal.cli.app import cli
from dal.errors import DalError, FormatError, InvalidName, VersionNotFound, one_line

SECRET = "hunter2-s3cr3t"


def dal_exe() -> str:
    exe = shutil.which("dal", path=os.path.dirname(sys.executable))
    assert exe, "the dal console script is not installed in this environment"
    return exe


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real console script (its own process: env_logger, RUST_BACKTRACE and the entry point as users get them)."""
    return subprocess.run(
        [dal_exe(), *args], env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=120
    )


def assert_one_error_line(code: int, out: str, err: str, *, expect: str = "") -> None:
    assert code == 1, (code, out, err)
    assert err.startswith("dal: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in out + err and "\x1b" not in err
    assert expect in err, err


# -- credentials in URLs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://user@host/db?password=" + SECRET, "postgresql://user@host/db?password=***"),
        ("postgresql://user:" + SECRET + "@host:5432/db", "postgresql://user:***@host:5432/db"),
        ("memory://bucket/x?secret=" + SECRET, "memory://bucket/x?secret=***"),
        ("https://a.blob.core.windows.net/c/x?sv=2022-11-02&sig=" + SECRET + "&se=1", "sv=2022-11-02&sig=***&se=1"),
        ("s3://b/x?X-Amz-Credential=AKID&X-Amz-Signature=" + SECRET, "X-Amz-Credential=***&X-Amz-Signature=***"),
        ("gs://b/x?token=" + SECRET + "&access_key=k", "token=***&access_key=***"),
        ("s3://AKID:" + SECRET + "/with/slash@bucket/x", "s3://AKID:***@bucket/x"),
    ],
)
def test_credentials_in_urls_are_masked(url: str, masked: str) -> None:
    assert SECRET not in mask_url(url) and masked in mask_url(url)
    assert has_credentials(url)
    assert SECRET not in mask_text(f"failed to open {url}: refused")


@pytest.mark.parametrize(
    "url", ["s3://bucket/date=2026-01-01", "/data/key=1/x", "abfss://container@acct.dfs.core.windows.net/p"]
)
def test_plain_locations_have_no_credentials(url: str) -> None:
    assert not has_credentials(url) and mask_url(url) == url


@pytest.mark.parametrize(
    "path",
    [
        "memory://bucket/x?secret=" + SECRET,
        "s3://bucket/x?sig=" + SECRET,
        "s3://bucket/x?password=" + SECRET,
        "az://container/x?sv=2022&sig=" + SECRET,
    ],
)
def test_a_location_with_credentials_is_refused_not_stored(sqlite_or_served_env: Catalog, path: str) -> None:
    with pytest.raises(DalError, match="contains credentials") as e:
        dal.write(pa.table({"id": [1]}), "leaky", path=path)
    assert SECRET not in str(e.value)
    with pytest.raises(DalError, match="contains credentials") as e:
        dal.register("leaky", path)
    assert SECRET not in str(e.value)
    assert sqlite_or_served_env.list_datasets() == []


def test_cli_never_prints_a_stored_secret(sqlite_url: str) -> None:
    """A location an older dal stored with a secret in it is masked by ``dal ls --json`` and ``dal show``."""
    cat = Catalog(sqlite_url)
    cat.create_dataset("old.leak", format="petastorm", location=f"memory://bucket/x?secret={SECRET}")
    cat.close()
    for args in (["ls", "--json"], ["show", "old.leak"], ["show", "old.leak", "--json"], ["ls"]):
        result = CliRunner().invoke(cli, ["--catalog", sqlite_url, *args])
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
    assert json.loads(CliRunner().invoke(cli, ["--catalog", sqlite_url, "ls", "--json"]).stdout)[0]["location"] == (
        "memory://bucket/x?secret=***"
    )


def test_db_status_masks_a_password_in_the_query(pg_server: str) -> None:
    url = f"{pg_server}{'&' if '?' in pg_server else '?'}password={SECRET}"  # trust auth: the password is unused
    proc = run_cli("--catalog", url, "db", "status")
    assert SECRET not in proc.stdout + proc.stderr and "password=***" in proc.stdout + proc.stderr
    proc = run_cli("--catalog", url, "db", "status", "--json")
    assert SECRET not in proc.stdout + proc.stderr


def test_catalog_errors_mask_the_url() -> None:
    url = f"postgresql://nobody:{SECRET}@127.0.0.1:1/db?password={SECRET}"  # refused: retried for 0.5 s, then given up
    proc = run_cli("--catalog", url, "ls", env={"DAL_CATALOG_RETRY_S": "0.5"})
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr)
    assert SECRET not in proc.stderr
    proc = run_cli("--catalog", f"nosuchdb://x?password={SECRET}", "ls")
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, expect="no database driver")
    assert SECRET not in proc.stderr


# -- names matched in full -----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["cam\n", "cam\r\n", "a.b\n", "\ncam", "cam\x00", "\uff43\uff41\uff4d", "cam\u200b"])
def test_names_and_tags_are_matched_in_full(bad: str) -> None:
    with pytest.raises(InvalidName):
        validate_name(bad)
    with pytest.raises(InvalidName):
        validate_tag(bad)


def test_a_name_with_a_trailing_newline_is_refused_everywhere(sqlite_or_served_env: Catalog) -> None:
    with pytest.raises(InvalidName):
        dal.write(pa.table({"id": [1]}), "cam\n")
    dal.write(pa.table({"id": [1]}), "cam")
    with pytest.raises(InvalidName):
        sqlite_or_served_env.tag("cam", 0, "prod\n")
    assert sqlite_or_served_env.tags("cam") == {} or list(sqlite_or_served_env.tags("cam")) == []
    result = CliRunner().invoke(cli, ["--catalog", sqlite_or_served_env.url, "show", "cam\n"])
    assert_one_error_line(result.exit_code, result.stdout, result.stderr, expect=r"invalid dataset name 'cam\n'")


# -- terminal escapes and Rich markup in user text ---------------------------------------------------------------

EVIL = "evil \x1b]0;pwned\x07\x1b[2J\x1b[31m[bold red]markup[/] \u202eabc\nnext"


def test_user_text_cannot_drive_the_terminal(sqlite_or_served_env: Catalog) -> None:
    sqlite_url = sqlite_or_served_env.url
    cat = sqlite_or_served_env
    cat.create_dataset("d.evil", format="delta", location="/w/evil", description=EVIL, owner="o\x1b[8m")
    cat.close()
    for args in (["ls"], ["show", "d.evil"], ["ls", "--json"], ["show", "d.evil", "--json"]):
        proc = run_cli("--catalog", sqlite_url, *args)
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\u202e" not in proc.stdout
    out = run_cli("--catalog", sqlite_url, "show", "d.evil").stdout
    assert r"\x1b]0;pwned\x07" in out and "[bold red]markup[/]" in out  # shown, escaped, not interpreted
    assert json.loads(run_cli("--catalog", sqlite_url, "ls", "--json").stdout)[0]["description"] == EVIL


def test_one_line_strips_colours_backtraces_and_controls() -> None:
    raw = (
        "Generic S3 error:\n  \x1b[31m↳\x1b[0m Error performing PUT http://u:pw@h/x?sig=abc\n"
        "Stack backtrace:\n   0: std::backtrace\n   1: object_store"
    )
    line = one_line(raw)
    assert "\n" not in line and "\x1b" not in line and "backtrace" not in line
    assert "pw" not in line.split("h/x")[0] and "sig=***" in line
    assert one_line("a\x00b\u202ec") == r"a\x00b\u202ec"


# -- one DalError, one line ------------------------------------------------------------------------------------------


@pytest.fixture
def small(sqlite_or_served_env: Catalog) -> dal.Dataset:
    dal.write(pa.table({"id": np.arange(100), "s": [f"row{i}" for i in range(100)]}), "small")
    return dal.open("small")


@pytest.mark.parametrize("ref", [99999999999999999999, "99999999999999999999", "²", "٣", -1, 2**63])
def test_odd_version_references_are_not_found(small: dal.Dataset, ref: object) -> None:
    with pytest.raises(VersionNotFound):
        dal.open("small", ref)  # type: ignore[arg-type]


@pytest.mark.parametrize("ref", [1.0, True, b"1", [1], object()])
def test_version_references_of_the_wrong_type_are_invalid(small: dal.Dataset, ref: object) -> None:
    with pytest.raises(InvalidName, match="invalid version"):
        dal.open("small", ref)  # type: ignore[arg-type]


@pytest.mark.parametrize("ref", ["99999999999999999999", "²", "\uff11"])
def test_cli_odd_versions_are_one_line(small: dal.Dataset, sqlite_or_served_env: Catalog, ref: str) -> None:
    result = CliRunner().invoke(cli, ["--catalog", sqlite_or_served_env.url, "schema", "small", "--version", ref])
    assert_one_error_line(result.exit_code, result.stdout, result.stderr, expect="not found")


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.shuffle(seed=-1),
        lambda d: d.shuffle(seed="1"),
        lambda d: d.shuffle(1, buffer_size=0),
        lambda d: list(d.iter_batches("10")),
        lambda d: list(d.iter_batches(0)),
        lambda d: list(d.iter_batches(2.5)),
        lambda d: d.scan().set_epoch(-1),
        lambda d: list(d.sequences("3", column="id")),
    ],
)
def test_bad_reader_arguments_are_dal_errors(small: dal.Dataset, call: object) -> None:
    with pytest.raises(DalError):
        call(small)  # type: ignore[operator]


def test_a_truncated_parquet_file_is_a_format_error(small: dal.Dataset, tmp_path: Path) -> None:
    (data,) = [f.uri for f in small.files()]
    blob = Path(data).read_bytes()
    Path(data).write_bytes(blob[: len(blob) // 2])
    fresh = dal.open("small")
    for read in (fresh.to_arrow, lambda: fresh.filter("id > 3").count(), fresh.scan().plan):
        with pytest.raises(FormatError, match="reading small version 0 failed") as e:
            read()
        assert "\n" not in str(e.value)
    # an unfiltered count is the log's numRecords (file-level plan tasks open no file, as delta-rs's count)
    assert fresh.scan().count() == small.count()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_register_of_a_corrupt_common_metadata_is_a_format_error(
    sqlite_or_served_env: Catalog, tmp_path: Path, damage: str
) -> None:
    from dal.tensors.codecs import ScalarCodec
    from dal.tensors.schema import TensorField, TensorSchema

    schema = TensorSchema("S", [TensorField("id", np.int64, (), ScalarCodec())])
    src = tmp_path / "pt"
    dal.write({"id": np.arange(5)}, "pt", format="petastorm", schema=schema, path=str(src))
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    for meta in dst.rglob("_common_metadata"):
        blob = meta.read_bytes()
        meta.write_bytes(blob[: len(blob) // 2] if damage == "truncate" else b"PAR1" + b"\xff" * 50 + b"PAR1")
    with pytest.raises(FormatError, match="_common_metadata is damaged"):
        dal.register("copy", str(dst), format="petastorm")
    proc = run_cli("--catalog", sqlite_or_served_env.url, "register", "copy2", str(dst), "--format", "petastorm")
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr)


def test_uncreatable_catalog_or_home_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc = run_cli("db", "upgrade", env={"DAL_HOME": str(blocker / "home")})
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, expect="cannot create the catalog's folder")
    proc = run_cli("--catalog", f"sqlite:///{blocker}/sub/catalog.db", "db", "upgrade")
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, expect="cannot create the catalog's folder")
    proc = run_cli("--catalog", f"sqlite:///{blocker}/sub/catalog.db", "ls")  # a read creates nothing
    assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, expect="no catalog at")


def test_s3_without_credentials_fails_fast_before_writing(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: pyarrow uploaded the files unsigned, then obstore spent its retries on the instance-metadata
    endpoint. Now: refused before any byte is sent, with the hint."""
    import boto3

    from dal.tensors.codecs import ScalarCodec
    from dal.tensors.schema import TensorField, TensorSchema

    bucket, options = s3
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    endpoint_only = {"AWS_ENDPOINT_URL": options["AWS_ENDPOINT_URL"]}
    schema = TensorSchema("S", [TensorField("id", np.int64, (), ScalarCodec())])
    with pytest.raises(DalError, match="no S3 credentials.*AWS_ACCESS_KEY_ID"):
        dal.write({"id": np.arange(5)}, "pt", format="petastorm", schema=schema, path=f"s3://{bucket}/pt",
                  storage_options=endpoint_only)  # fmt: skip
    with pytest.raises(DalError, match="no (S3 )?credentials.*AWS_ACCESS_KEY_ID"):  # delta-rs looks first
        dal.write(pa.table({"id": [1]}), "dl", path=f"s3://{bucket}/dl", storage_options=endpoint_only)
    client = boto3.client(
        "s3",
        endpoint_url=options["AWS_ENDPOINT_URL"],
        aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0  # nothing was uploaded


def test_object_store_errors_are_one_line_with_a_hint(sqlite_env: Catalog) -> None:
    """An unreachable endpoint, with RUST_BACKTRACE=1: one line, no ANSI colours, a hint about the endpoint."""
    env = {
        "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "RUST_BACKTRACE": "1",
        "DAL_CATALOG_URL": sqlite_env.url,
    }
    for fmt in ("delta", "petastorm"):
        proc = run_cli("register", "r", "s3://bucket/x", "--format", fmt, env=env)
        assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, expect="hint: the object store cannot be")
        assert SECRET not in proc.stderr


def test_a_bug_is_one_line_asking_for_a_report(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Catalog, pattern: str | None = None, **limit: object) -> list[object]:
        raise ZeroDivisionError("a bug")

    from dal.catalog.lite import LiteCatalog

    Catalog(sqlite_url).close()  # dal ls reads a catalog, it creates none
    monkeypatch.setattr(Catalog, "list_datasets", broken)
    monkeypatch.setattr(LiteCatalog, "list_datasets", broken)  # dal ls reads an existing catalog through it
    result = CliRunner().invoke(cli, ["--catalog", sqlite_url, "ls"])
    assert result.exit_code == 70
    assert result.stderr.startswith("dal: internal error: ZeroDivisionError: a bug") and "report" in result.stderr
    assert result.stderr.count("\n") == 1
    monkeypatch.setenv("DAL_DEBUG", "1")
    result = CliRunner().invoke(cli, ["--catalog", sqlite_url, "ls"])
    assert isinstance(result.exception, ZeroDivisionError)  # the traceback, on request


def test_a_partition_value_ending_in_a_newline_is_not_plain() -> None:
    """Spark's partition discovery would not parse ``c=a\\n`` back: such a file must be read by its value."""
    from dal.spark.read import _hive_path

    assert _hive_path("/t", "/t/c=a/f.parquet", (("c", "a"),))
    assert not _hive_path("/t", "/t/c=a\n/f.parquet", (("c", "a\n"),))
    assert not _hive_path("/t", "/t/c=/f.parquet", (("c", ""),))


def test_expression_and_adapter_arguments_are_dal_errors(small: dal.Dataset) -> None:
    for bad in (1, None, b"id", ["id"]):
        with pytest.raises(DalError, match="column name"):
            small.filter(dal.col(bad) == 1)  # type: ignore[arg-type]
    for batch_size in ("10", 0, 1.5):
        with pytest.raises(DalError, match="batch_size"):
            small.to_torch(batch_size)  # type: ignore[arg-type]


def test_unreachable_hive_metastore_is_one_line(small: dal.Dataset, sqlite_or_served_env: Catalog) -> None:
    """thrift logs "Could not connect …" before raising: the CLI must still print only its own line."""
    for argv in (["hive", "sync", "small"], ["hive", "import", "db.t"]):
        proc = run_cli(*argv, "--uri", "thrift://127.0.0.1:1", env={"DAL_CATALOG_URL": sqlite_or_served_env.url})
        assert_one_error_line(proc.returncode, proc.stdout, proc.stderr, expect="cannot reach the Hive Metastore")


def test_a_delta_write_error_is_one_line_with_a_hint(sqlite_env: Catalog) -> None:
    """delta-rs' own message spans lines (and names the instance-metadata endpoint): the error says it once."""
    with pytest.raises(FormatError) as e:
        dal.write(pa.table({"cam\n": ["a"], "id": [1]}), "cams", partition_by=["cam\n"])
    assert "\n" not in str(e.value) and "writing Delta table" in str(e.value)


def test_a_petastorm_write_with_profile_credentials_commits(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials only in the shared credentials file: pyarrow read them and uploaded the files, then obstore
    (which reads no profile) asked the instance-metadata endpoint and the commit failed. Both clients get them."""
    from dal.tensors.codecs import ScalarCodec
    from dal.tensors.schema import TensorField, TensorSchema
    from tests.objectstores import SECRET as S3_SECRET

    bucket, options = s3
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[default]\naws_access_key_id = {options['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {options['AWS_SECRET_ACCESS_KEY']}\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    endpoint_only = {"AWS_ENDPOINT_URL": options["AWS_ENDPOINT_URL"], "AWS_REGION": "us-east-1"}
    schema = TensorSchema("S", [TensorField("id", np.int64, (), ScalarCodec())])
    v = dal.write({"id": np.arange(5)}, "pt", format="petastorm", schema=schema, path=f"s3://{bucket}/pt",
                  storage_options=endpoint_only)  # fmt: skip
    assert dal.open("pt", storage_options=endpoint_only).to_arrow().num_rows == 5 and v.number == 0
    db = Path(sqlite_env.url.removeprefix("sqlite:///"))
    stored = b"".join(p.read_bytes() for p in (db, db.with_name(db.name + "-wal")) if p.exists())
    assert S3_SECRET.encode() not in stored
