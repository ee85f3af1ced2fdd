"""``target_file_size`` is any integer in [1, 2**63-1] (issue 32), one check (``dal.validate.file_size``) for
``dal.write``, ``dal.lifecycle.optimize`` and ``dal optimize --target-file-size``: a NumPy integer was refused,
and 2**64 was accepted and failed inside delta-rs (2**63 passed a write and failed in optimize, whose bound it
is); now each is a ``DalError`` naming the argument before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal import lifecycle, validate
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError

N = 100_000


def _data() -> pa.Table:
    return pa.table({"id": pa.array(range(N), pa.int64()), "v": pa.array([i * 7 % 1_000_003 for i in range(N)])})


def _files(cat: Catalog, name: str) -> list[Path]:
    root = Path(cat.get_dataset(name).location)
    return [p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts]


@pytest.mark.parametrize("size", [np.int64(64 * 1024), np.uint32(64 * 1024), np.array(64 * 1024)], ids=repr)
def test_numpy_integers_are_sizes(sqlite_env: Catalog, size: Any) -> None:
    data = _data()
    dal.write(data, "tf.np", target_file_size=size)
    assert len(_files(sqlite_env, "tf.np")) > 1  # as delta-rs splits at 64 KiB given the int
    got = pa.table(deltalake.DeltaTable(sqlite_env.get_dataset("tf.np").location).to_pyarrow_dataset().to_table())
    assert got.sort_by("id").equals(data.cast(got.schema))  # the reference: delta-rs's own reading, every row once
    dal.write(data.slice(0, 10), "tf.np", mode="append")
    result = lifecycle.optimize("tf.np", target_file_size=np.int64(1 << 30))
    assert result.files_after == 1 and dal.open("tf.np").count() == N + 10


BAD = [0, -1, 2**63, 2**64, 2**200, np.uint64(2**63), True, np.bool_(True), 1.5, np.float64(1024), "1GB",
       np.timedelta64(1024, "s"), np.array([1024]), None]  # fmt: skip


@pytest.mark.parametrize("size", BAD, ids=repr)
def test_what_is_not_a_size_is_refused_before_anything_is_written(sqlite_env: Catalog, size: Any) -> None:
    if size is not None:  # None is dal.write's "no target"
        with pytest.raises(DalError, match="target_file_size must be a positive number of bytes"):
            dal.write(_data().slice(0, 5), "tf.bad", target_file_size=size)
        assert sqlite_env.list_datasets() == []
    dal.write(_data().slice(0, 5), "tf.ok")
    with pytest.raises(DalError, match="target_file_size must be a positive number of bytes"):
        lifecycle.optimize("tf.ok", target_file_size=size)
    assert [v.number for v in sqlite_env.versions("tf.ok")] == [0]


def test_the_bound_is_delta_rs_s(sqlite_env: Catalog, tmp_path: Path) -> None:
    assert validate.file_size(validate.MAX_FILE_SIZE) == 2**63 - 1
    deltalake.write_deltalake(str(tmp_path / "probe"), _data().slice(0, 1))
    with pytest.raises(ValueError, match="between 1 and 9223372036854775807"):  # delta-rs's own bound, one past it
        deltalake.DeltaTable(str(tmp_path / "probe")).optimize.compact(target_size=2**63)
    for i in range(2):
        dal.write(_data().slice(i * 5, 5), "tf.max")
    assert lifecycle.optimize("tf.max", target_file_size=2**63 - 1).files_after == 1


@pytest.mark.parametrize("text", ["99999999TiB", "9" * 400, "0", str(2**63)])
def test_the_cli_option_is_a_usage_error(sqlite_env: Catalog, text: str) -> None:
    dal.write(_data().slice(0, 5), "tf.cli")
    r = CliRunner().invoke(cli, ["--catalog", sqlite_env.url, "optimize", "tf.cli", "--target-file-size", text])
    assert r.exit_code == 2 and "--target-file-size" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert [v.number for v in sqlite_env.versions("tf.cli")] == [0]
