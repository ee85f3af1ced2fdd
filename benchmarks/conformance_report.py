"""Conformance report: dal against tables nobody on this project wrote (``../shared/conformance``).

    python benchmarks/conformance_report.py            # Delta (184 tables) and Petastorm, counts per class
    python benchmarks/conformance_report.py -v         # also every table that is not identical / refused by both

Delta: each table is copied to a temp dir, registered in a fresh SQLite catalog, and every version delta-rs
reads (its DataFusion engine, else its pyarrow path) is compared with ``dal.open(name, n).to_arrow()``
(rows as multisets). Classes, per table (the worst of its versions):

- identical: every version delta-rs reads, dal reads with the same rows; every other one is a DalError
- refused by both: delta-rs reads no version; dal refuses with a DalError
- dal reads, delta-rs refuses / different rows: see the notes the tests keep for each such table
- dal refuses, delta-rs reads; raw crash (an exception that is not a DalError, or a refusal that does
  not name the dataset and version); silent skip (a version delta-rs reads that register did not record)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conformance.conftest import CORPUS  # noqa: E402
from tests.conformance.test_delta_conformance import (  # noqa: E402
    CLASSES,
    DAL_READS_MORE,
    DELTA_RS_WRONG,
    IDENTICAL,
    REFUSED_BY_BOTH,
    classify_corpus,
)


def delta_report(verbose: bool) -> dict[str, int]:
    start = time.perf_counter()
    results = classify_corpus()
    counts = Counter(o.klass for o in results.values())
    print(f"Delta: {len(results)} tables from {CORPUS} ({time.perf_counter() - start:.0f} s)")
    for klass in CLASSES:
        print(f"  {klass:<30} {counts.get(klass, 0):>4}")
    for table, out in sorted(results.items()):
        if out.klass in (IDENTICAL, REFUSED_BY_BOTH):
            continue
        why = DAL_READS_MORE.get(table) or DELTA_RS_WRONG.get(table) or ""
        print(f"  - {table}: {out.klass}" + (f" (known: {why})" if why else ""))
        if verbose:
            for d in out.details[:5]:
                print(f"      {d[:300]}")
    return dict(counts)


# --- Petastorm -------------------------------------------------------------------------------------------
def petastorm_report(verbose: bool) -> dict[str, int] | None:
    """The six legacy datasets, counts per class (H2's half: ``benchmarks/petastorm_conformance.py``)."""
    from benchmarks.petastorm_conformance import petastorm_report as report

    return report(verbose)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="print why each non-identical table is so")
    args = parser.parse_args()
    if not (CORPUS / "manifest.json").is_file():
        print(f"no conformance corpus at {CORPUS}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    delta_report(args.verbose)
    petastorm_report(args.verbose)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
