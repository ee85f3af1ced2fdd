"""Reading Parquet and Petastorm datasets from ``gs://`` through pyarrow's GCS client, against
gcp-storage-emulator on loopback. (Writes to GCS are not tested here: see the module note in README —
delta-rs and obstore speak GCS's XML API, which no emulator installable here implements.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dal
from dal.catalog import Catalog
from dal.storage import uris
from tests.petastorm.test_petastorm_dataset import SCHEMA, frames


def test_parquet_and_petastorm_datasets_on_gcs_are_registered_and_read(
    sqlite_env: Catalog, gcs: tuple[str, dict[str, str]]
) -> None:
    bucket, options = gcs
    fs, _ = uris.filesystem(f"gs://{bucket}", options)
    for day, n in (("2026-01-01", 3), ("2026-01-02", 2)):
        pq.write_table(pa.table({"v": np.arange(n)}), f"{bucket}/plain/day={day}/part-0.parquet", filesystem=fs)
    (p,) = dal.register("gs.plain", f"gs://{bucket}/plain", format="parquet", storage_options=options)
    assert (p.row_count, p.file_count, p.partition_columns) == (5, 2, ("day",))
    scan = dal.open("gs.plain", storage_options=options).filter("day = '2026-01-01'")
    assert sorted(scan.to_arrow().column("v").to_pylist()) == [0, 1, 2]

    dal.write(frames(5), "local.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"])
    local = Path(dal.open("local.frames").petastorm_url.removeprefix("file://"))
    for f in local.rglob("*"):
        if f.is_file():
            with fs.open_output_stream(f"{bucket}/frames/{f.relative_to(local)}") as out:
                out.write(f.read_bytes())
    (v,) = dal.register("gs.frames", f"gs://{bucket}/frames", format="petastorm", storage_options=options)
    assert (v.row_count, v.partition_columns) == (5, ("camera",))
    got = dal.open("gs.frames", storage_options=options).to_numpy()
    order = np.argsort(got["id"])
    assert got["id"][order].tolist() == list(range(5))
    np.testing.assert_array_equal(got["rgb"][order][3], np.full((6, 8, 3), 3, np.uint8))
