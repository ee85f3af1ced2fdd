"""The Petastorm half of the conformance report (``benchmarks/conformance_report.py`` calls
``petastorm_report``): the six legacy datasets of petastorm's test suite (petastorm 0.4.0 ... 0.7.6, Python 2
pickles), each copied to a temp dir, registered in a fresh SQLite catalog and read with ``to_numpy``; every
deterministic value of every row is checked (``tests/conformance/test_petastorm_legacy.py``).

Classes: values exact / values differ / refused (DalError) / raw crash. When the pinned legacy venv with
petastorm 0.13.1 is already built (``tests/petastorm/legacy.py``; the interop tests build it), the same copies
are also read with petastorm's own ``make_reader``, for the "petastorm 0.13.1 reads" column.

    python benchmarks/petastorm_conformance.py [-v]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.conformance.conftest import CORPUS  # noqa: E402
from tests.conformance.test_petastorm_legacy import (  # noqa: E402
    DIFFERENT,
    EXACT,
    RAW_CRASH,
    REFUSED,
    VERSIONS,
    classify_legacy,
    copy_dataset,
)

CLASSES = (EXACT, DIFFERENT, REFUSED, RAW_CRASH)


def petastorm_reads(work: Path) -> dict[str, str] | None:
    """What petastorm 0.13.1's make_reader does with each dataset ("reads N rows" or its error), or None
    when the legacy venv is not built (building it takes minutes: the interop tests do it)."""
    from tests.petastorm.legacy import cache_dir, run_legacy

    if not (cache_dir() / ".ready").exists():
        return None
    paths = {v: copy_dataset(v, work / "petastorm") for v in VERSIONS}
    out = work / "petastorm.json"
    proc = run_legacy("petastorm_read_json.py", str(out), *(f"file://{p}" for p in paths.values()))
    if proc.returncode != 0:
        return {v: f"legacy script failed: {proc.stderr.strip().splitlines()[-1:]}" for v in VERSIONS}
    result = json.loads(out.read_text())
    outcome = {}
    for version, path in paths.items():
        r = result[f"file://{path}"]
        outcome[version] = f"reads {len(r['rows'])} rows" if "error" not in r else r["error"].split(" on <module")[0]
    return outcome


def petastorm_report(verbose: bool) -> dict[str, int]:
    start = time.perf_counter()
    results = {}
    for version in VERSIONS:
        with tempfile.TemporaryDirectory() as d:
            results[version] = classify_legacy(version, Path(d))
    with tempfile.TemporaryDirectory() as d:
        theirs = petastorm_reads(Path(d))
    counts = Counter(klass for klass, _ in results.values())
    print(
        f"Petastorm: {len(results)} legacy datasets from {CORPUS / 'petastorm'} ({time.perf_counter() - start:.0f} s)"
    )
    for klass in CLASSES:
        print(f"  {klass:<30} {counts.get(klass, 0):>4}")
    if theirs is not None:
        read = sum(1 for o in theirs.values() if o.startswith("reads"))
        print(f"  petastorm 0.13.1 make_reader reads {read}/{len(theirs)}")
    for version, (klass, details) in results.items():
        line = f"  - legacy__{version}: dal {klass}"
        if theirs is not None:
            line += f"; petastorm 0.13.1: {theirs[version]}"
        print(line)
        if verbose or klass != EXACT:
            for d in details[:5]:
                print(f"      {d[:300]}")
    out = dict(counts)
    if theirs is not None:
        out["petastorm 0.13.1 reads"] = sum(1 for o in theirs.values() if o.startswith("reads"))
    return out


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    petastorm_report("-v" in sys.argv[1:])
