"""delta-spark's native writer carries dal's keys as the JSON of its ``userMetadata``: found again by write id,
and naming the dataset (so a killed first write is adopted), like delta-rs commits."""

from __future__ import annotations

import json

from dal.formats.base import WriteOptions, commit_metadata
from dal.formats.delta.log import _metadata
from dal.formats.delta.write import DeltaWrite


def test_native_writes_stamp_write_id_and_dataset() -> None:
    opts = WriteOptions(schema_mode="merge", commit_metadata=commit_metadata("w1", "a.b"))
    options = DeltaWrite("/tmp/t", opts).spark_options()
    assert options is not None and options["mergeSchema"] == "true"
    info = _metadata({"userMetadata": options["userMetadata"], "timestamp": 1})
    assert (info["dal.write_id"], info["dal.dataset"]) == ("w1", "a.b")


def test_older_bare_write_ids_and_foreign_user_metadata() -> None:
    assert _metadata({"userMetadata": "w0"})["dal.write_id"] == "w0"  # what an older dal wrote
    assert _metadata({"userMetadata": json.dumps(["x"])})["dal.write_id"] == json.dumps(["x"])
    assert _metadata({"dal.write_id": "w2"}) == {"dal.write_id": "w2"}  # delta-rs: keys in commitInfo itself
