"""A write reads its location's claim once per check, never again to learn what the check found
(``claims.check`` says whether it created the claim): on an object store every read is a GET."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.storage import claims
from dal.storage.location import Location


@pytest.fixture
def claim_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    reads: list[str] = []
    real = claims.read

    def counted(loc: Location) -> claims.Claim | None:
        reads.append(loc.uri)
        return real(loc)

    monkeypatch.setattr(claims, "read", counted)
    yield reads


def test_a_write_reads_the_claim_once_per_check(sqlite_env: Catalog, claim_reads: list[str]) -> None:
    dal.write(pa.table({"id": [1, 2]}), "claims.first")
    # three checks, one read each: before anything is written, with the intent registered (creating the claim
    # there), and the recording's sync; none read again to learn what a check found (before: 5 reads)
    assert len(claim_reads) == 3
    claim_reads.clear()
    dal.write(pa.table({"id": [3]}), "claims.first")
    assert len(claim_reads) == 3  # an append: the same three checks (before: 4 reads)
    assert sorted(dal.open("claims.first").to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_a_refused_first_write_releases_the_claim_it_created(
    sqlite_env: Catalog, claim_reads: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dal.formats.delta.write import DeltaWrite

    def fail(self: DeltaWrite, prepared: object) -> int:
        raise dal.DalError("storage refused the write")

    monkeypatch.setattr(DeltaWrite, "write_prepared", fail)
    where = tmp_path / "fresh"
    with pytest.raises(dal.DalError, match="storage refused"):
        dal.write(pa.table({"id": [1]}), "claims.fresh", path=str(where))
    assert claims.read(Location.of(str(where))) is None  # the claim this write created is gone with it
