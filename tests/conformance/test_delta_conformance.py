"""dal against Delta tables nobody on this project wrote (../shared/conformance, 184 tables).

For every table: copy it to a temp dir, ``dal.register`` it into a fresh SQLite catalog, and for every
version that delta-rs reads (its pyarrow path, or its DataFusion engine where that refuses: deletion
vectors, v2 checkpoints), ``dal.open(name, n).to_arrow()`` must hold the same rows. Every other version
must be a ``DalError`` naming the dataset, the version and the reason; no raw exception may escape.
``classify`` is also what ``benchmarks/conformance_report.py`` counts.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conformance.conftest import CORPUS, corpus_tables, require_corpus

IDENTICAL = "identical"
REFUSED_BY_BOTH = "refused by both"
DAL_REFUSES = "dal refuses, delta-rs reads"
DIFFERENT = "different rows"
RAW_CRASH = "raw crash"
SILENT_SKIP = "silent skip"
DAL_ONLY = "dal reads, delta-rs refuses"
CLASSES = (IDENTICAL, REFUSED_BY_BOTH, DAL_ONLY, DAL_REFUSES, DIFFERENT, RAW_CRASH, SILENT_SKIP)

NAME = "conformance.t"


def log_versions(path: Path) -> list[int]:
    """Every version the log names (commit files and checkpoints), oldest first."""
    found = set()
    for f in (path / "_delta_log").iterdir() if (path / "_delta_log").is_dir() else []:
        m = re.match(r"^(\d{20})\.(json|checkpoint\.)", f.name)
        if m:
            found.add(int(m.group(1)))
    return sorted(found) if not found else list(range(min(found), max(found) + 1))


def delta_rs_read(path: Path, version: int) -> pa.Table | Exception:
    """What delta-rs reads at ``version``: its DataFusion engine, else its pyarrow path; the error if neither.

    The engine comes first: the pyarrow path refuses deletion vectors, v2 checkpoints and INT96 timestamps
    past 2262, and silently returns null columns for column-mapped tables (measured on this corpus).
    """
    from deltalake import DeltaTable, QueryBuilder

    try:
        table = DeltaTable(str(path), version=version)
    except Exception as e:
        return e
    try:
        return pa.table(QueryBuilder().register("t", table).execute("select * from t").read_all())
    except Exception as first:
        try:
            return table.to_pyarrow_table()
        except Exception:
            return first


def _canon(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value
    if isinstance(value, dict):
        return tuple(sorted((k, _canon(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_canon(v) for v in value)
    if isinstance(value, datetime | date | Decimal | bytes):
        return repr(value)
    return value


def rows(table: pa.Table) -> Counter[str]:
    """The multiset of rows (columns by name; order-independent)."""
    names = table.schema.names
    out: Counter[str] = Counter()
    for row in table.to_pylist():
        out[repr(tuple((n, _canon(row[n])) for n in sorted(names)))] += 1
    return out


def same_rows(ours: pa.Table, theirs: pa.Table) -> str | None:
    """None when both tables hold the same columns and rows, else what differs."""
    if sorted(ours.schema.names) != sorted(theirs.schema.names):
        return f"columns {ours.schema.names} != delta-rs {theirs.schema.names}"
    if ours.num_rows != theirs.num_rows:
        return f"{ours.num_rows} rows != delta-rs {theirs.num_rows}"
    a, b = rows(ours), rows(theirs)
    if a != b:
        extra, missing = list((a - b).elements())[:2], list((b - a).elements())[:2]
        return f"rows differ: dal has {extra} that delta-rs lacks; delta-rs has {missing}"
    return None


@dataclass
class Outcome:
    """How dal fared on one table, version by version."""

    klass: str = IDENTICAL
    details: list[str] = field(default_factory=list)

    def note(self, klass: str, detail: str) -> None:
        order = {k: i for i, k in enumerate(CLASSES)}
        if order[klass] > order[self.klass]:
            self.klass = klass
        self.details.append(f"[{klass}] {detail}")


def _is_dal_error(e: BaseException) -> bool:
    from dal.errors import DalError

    return isinstance(e, DalError)


def classify(src: Path, work: Path) -> Outcome:
    """Register a copy of the table at ``src`` under ``work`` and compare every version with delta-rs."""
    import dal

    table = work / "table"
    shutil.copytree(src, table, symlinks=True)
    catalog = f"sqlite:///{work}/catalog.db"
    versions = log_versions(table)
    theirs = {v: delta_rs_read(table, v) for v in versions}
    out = Outcome()
    if not any(isinstance(t, pa.Table) for t in theirs.values()):
        out.klass = REFUSED_BY_BOTH
    try:
        dal.register(NAME, str(table), catalog=catalog)
    except Exception as e:
        if not _is_dal_error(e):
            out.note(RAW_CRASH, f"register: {type(e).__name__}: {e}")
        elif any(isinstance(t, pa.Table) for t in theirs.values()):
            out.note(DAL_REFUSES, f"register: {e}")
        return out
    recorded = {v.storage_version: v.number for v in dal.get_catalog(catalog).versions(NAME)}
    for v in versions:
        ref = theirs[v]
        if v not in recorded:
            if isinstance(ref, pa.Table):
                out.note(SILENT_SKIP, f"v{v}: delta-rs reads it, register did not record it")
            continue
        try:
            mine: pa.Table | Exception = dal.open(NAME, recorded[v], catalog=catalog).to_arrow()
        except Exception as e:
            mine = e
        if isinstance(mine, Exception):
            if not _is_dal_error(mine):
                out.note(RAW_CRASH, f"v{v}: {type(mine).__name__}: {mine}")
            elif isinstance(ref, pa.Table):
                out.note(DAL_REFUSES, f"v{v}: {mine}")
            elif NAME not in str(mine) or f"version {recorded[v]}" not in str(mine):
                out.note(RAW_CRASH, f"v{v}: the refusal does not name the dataset and version: {mine}")
            continue
        if not isinstance(ref, pa.Table):
            out.note(DAL_ONLY, f"v{v}: delta-rs refuses ({type(ref).__name__}: {str(ref)[:200]})")
            continue
        problem = same_rows(mine, ref)
        if problem:
            out.note(DIFFERENT, f"v{v}: {problem}")
    return out


TABLES = corpus_tables("delta")
# where dal reads a version delta-rs refuses, and why that is right (each checked by a test below)
DAL_READS_MORE: dict[str, str] = {
    "delta-golden/basic-with-vacuum-protocol-check-feature": "v1 only adds the vacuumProtocolCheck reader "
    "feature (SET TBLPROPERTIES, no data change), which constrains VACUUM, not reads; delta-rs refuses it",
}
# where delta-rs reads wrong rows and dal does not (each checked by a test below)
DELTA_RS_WRONG: dict[str, str] = {
    "delta-rs/table_with_edge_timestamps": "INT96 timestamps in year 9999: delta-rs's engine wraps them "
    "around to 1816 (its pyarrow path refuses them); dal keeps microseconds, as the log's statistics say",
}


@pytest.mark.parametrize(
    "entry", TABLES or [None], ids=[t["local_path"] for t in TABLES] if TABLES else ["corpus-absent"]
)
def test_delta_table(entry: dict[str, Any] | None, tmp_path: Path) -> None:
    require_corpus()
    assert entry is not None
    out = classify(CORPUS / entry["local_path"], tmp_path)
    allowed = {IDENTICAL, REFUSED_BY_BOTH}
    if entry["local_path"] in DAL_READS_MORE:
        allowed.add(DAL_ONLY)
    if entry["local_path"] in DELTA_RS_WRONG:
        allowed.add(DIFFERENT)
    assert out.klass in allowed, "\n".join(out.details)


def _registered(table: str, tmp_path: Path) -> str:
    import dal

    require_corpus()
    shutil.copytree(CORPUS / table, tmp_path / "table")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register(NAME, str(tmp_path / "table"), catalog=catalog)
    return catalog


def test_vacuum_protocol_check_version_reads_as_the_version_before(tmp_path: Path) -> None:
    import dal

    catalog = _registered("delta-golden/basic-with-vacuum-protocol-check-feature", tmp_path)
    v0 = delta_rs_read(tmp_path / "table", 0)
    assert isinstance(v0, pa.Table) and v0.num_rows == 100
    assert same_rows(dal.open(NAME, 1, catalog=catalog).to_arrow(), v0) is None


def test_edge_timestamps_keep_the_year_9999(tmp_path: Path) -> None:
    import dal

    catalog = _registered("delta-rs/table_with_edge_timestamps", tmp_path)
    got = dal.open(NAME, catalog=catalog).to_arrow().sort_by("SOME_VALUE")
    assert [t.date() for t in got.column("BIG_DATE").to_pylist()] == [date(9999, 12, 31), date(9999, 12, 30)]
    assert [t.date() for t in got.column("NORMAL_DATE").to_pylist()] == [date(2022, 1, 1), date(2022, 2, 1)]


def classify_corpus() -> dict[str, Outcome]:
    """Every Delta table of the corpus, classified (for benchmarks/conformance_report.py)."""
    results = {}
    for entry in corpus_tables("delta"):
        with tempfile.TemporaryDirectory() as d:
            results[entry["local_path"]] = classify(CORPUS / entry["local_path"], Path(d))
    return results
