"""Compatibility with the real petastorm 0.13.1 (in its pinned legacy venv), in both directions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dal
from dal import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from tests.petastorm.legacy import run_legacy

pytestmark = pytest.mark.slow

FIELDS = ["id", "station", "score", "matrix", "points", "image", "photo", "mask"]


def test_dal_reads_what_petastorm_wrote(cat: Catalog, tmp_path: Path) -> None:
    out, expected_path = tmp_path / "petastorm_ds", tmp_path / "expected.npz"
    proc = run_legacy("petastorm_write.py", str(out), str(expected_path))
    assert proc.returncode == 0 and "WROTE 20" in proc.stdout, proc.stderr[-3000:]
    expected = np.load(expected_path)

    (v,) = dal.register("legacy.scans", str(out), format="petastorm")
    assert (v.number, v.row_count, v.partition_columns) == (0, 20, ("station",))
    assert {p.key: p.row_count for p in cat.partitions("legacy.scans")} == {"station=YUL": 10, "station=YYZ": 10}
    fields = {f.name: f for f in v.schema}
    assert (fields["matrix"].dtype, fields["matrix"].shape, fields["matrix"].codec) == ("float32", (3, 4), "ndarray")
    assert (fields["points"].shape, fields["points"].codec) == ((None, 2), "compressed_ndarray")
    assert fields["photo"].codec == "image/jpeg;quality=95" and fields["mask"].shape == (16, 12)

    got = dal.open("legacy.scans").to_numpy()
    order = np.argsort(got["id"])
    assert list(got["id"][order]) == list(range(20))
    assert got["matrix"].shape == (20, 3, 4) and got["matrix"].dtype == np.float32
    assert got["image"].shape == (20, 16, 12, 3) and got["image"].dtype == np.uint8
    for row, i in enumerate(order):
        ident = int(got["id"][i])
        assert got["station"][i] == str(expected[f"station/{ident}"])
        assert got["score"][i] == expected[f"score/{ident}"]
        np.testing.assert_array_equal(got["matrix"][i], expected[f"matrix/{ident}"])
        np.testing.assert_array_equal(got["points"][i], expected[f"points/{ident}"])
        assert got["points"][i].dtype == np.int16
        np.testing.assert_array_equal(got["image"][i], expected[f"image/{ident}"])  # RGB, as written
        np.testing.assert_array_equal(got["mask"][i], expected[f"mask/{ident}"])
        # jpeg is lossy: compare to what was encoded, within jpeg error
        assert np.abs(got["photo"][i].astype(int) - expected[f"photo/{ident}"].astype(int)).mean() < 2.0, row


def tensor_schema() -> TensorSchema:
    return TensorSchema("DalScans", [
        TensorField("id", np.int32, (), ScalarCodec()),
        TensorField("station", np.str_, (), ScalarCodec()),
        TensorField("score", np.float64, (), ScalarCodec()),
        TensorField("matrix", np.float32, (3, 4), NdarrayCodec()),
        TensorField("points", np.int16, (None, 2), CompressedNdarrayCodec()),
        TensorField("image", np.uint8, (16, 12, 3), ImageCodec("png")),
        TensorField("photo", np.uint8, (16, 12, 3), ImageCodec("jpeg", 95)),
        TensorField("mask", np.uint8, (16, 12), ImageCodec("png")),
    ])  # fmt: skip


def rows(n: int, start: int = 0) -> list[dict[str, object]]:
    rng = np.random.default_rng(start)
    out = []
    for i in range(start, start + n):
        smooth = (np.add.outer(np.arange(16), np.arange(12)) * 5 + i).astype(np.uint8)
        out.append({
            "id": i,
            "station": "YUL" if i % 2 else "YYZ",
            "score": i / 3,
            "matrix": rng.standard_normal((3, 4)).astype(np.float32),
            "points": rng.integers(-500, 500, (i % 5 + 1, 2)).astype(np.int16),
            "image": rng.integers(0, 255, (16, 12, 3)).astype(np.uint8),
            "photo": np.stack([smooth, smooth // 2, 255 - smooth], axis=-1),
            "mask": (rng.integers(0, 2, (16, 12)) * 255).astype(np.uint8),
        })  # fmt: skip
    return out


def test_petastorm_reads_what_dal_wrote(cat: Catalog, tmp_path: Path) -> None:
    first, more = rows(12), rows(6, start=100)
    dal.write(first, "dal.scans", format="petastorm", schema=tensor_schema(), partition_by=["station"])
    v1 = dal.write(more, "dal.scans", format="petastorm")
    assert (v1.number, v1.row_count, v1.operation) == (1, 18, "append")
    written = {r["id"]: r for r in first + more}

    for version, ids in ((0, {r["id"] for r in first}), (1, set(written))):
        url = dal.open("dal.scans", version).petastorm_url
        out = tmp_path / f"read-v{version}.npz"
        proc = run_legacy("petastorm_read.py", url, str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"MAKE_READER {len(ids)}" in proc.stdout and f"MAKE_BATCH_READER {len(ids)}" in proc.stdout
        got = np.load(out)
        for ident in ids:
            row = written[ident]
            for reader in ("row", "batch"):
                assert str(got[f"{reader}/station/{ident}"]) == row["station"]
                assert float(got[f"{reader}/score/{ident}"]) == row["score"]
            np.testing.assert_array_equal(got[f"row/matrix/{ident}"], row["matrix"])
            assert got[f"row/matrix/{ident}"].dtype == np.float32
            np.testing.assert_array_equal(got[f"row/points/{ident}"], row["points"])
            np.testing.assert_array_equal(got[f"row/image/{ident}"], row["image"])  # channel order survives
            np.testing.assert_array_equal(got[f"row/mask/{ident}"], row["mask"])
            assert np.abs(got[f"row/photo/{ident}"].astype(int) - np.asarray(row["photo"], int)).mean() < 2.0
            np.testing.assert_array_equal(got[f"batch/matrix/{ident}"], row["matrix"])
            np.testing.assert_array_equal(got[f"batch/image/{ident}"], row["image"])
