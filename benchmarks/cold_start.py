"""Cold start: a new process's ``import dal``, ``dal.open`` and first batch, against a baseline checkout.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/cold_start.py --baseline /path/to/older/checkout --runs 8

Writes a small Delta table into a temporary catalog (the embedded SQLite default under a temporary ``DAL_HOME``),
byte-compiles both checkouts, then runs their processes alternately (a burst of load elsewhere hits both alike) with
``PYTHONPATH`` at each, and prints every run's seconds, sorted, per checkout and path (``arrow``:
``select(...).iter_batches(1024)``; ``torch``: ``to_torch(256)``, torch's import included).
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import sys, time
t = time.perf_counter()
import dal
ds = dal.open("cold.start")
if sys.argv[1] == "torch":
    next(iter(ds.to_torch(256)))
else:
    next(iter(ds.select("id", "x").iter_batches(1024)))
print(f"{time.perf_counter() - t:.3f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default=None, help="another checkout of dal to compare with")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--paths", default="arrow,torch")
    args = parser.parse_args()
    trees = {"this": str(REPO)} | ({"baseline": args.baseline} if args.baseline else {})
    for tree in trees.values():  # byte-compiled first, as an install is (PYTHONDONTWRITEBYTECODE may be set)
        for package in ("dal", "catalog"):
            compileall.compile_dir(str(Path(tree) / package), quiet=1)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "DAL_HOME": home, "OPENLINEAGE_DISABLED": "true"}
        env.pop("DAL_CATALOG_URL", None)
        make = (
            "import dal, pyarrow as pa; dal.write(pa.table({'id': range(10_000), 'x': [0.5] * 10_000}), 'cold.start')"
        )
        subprocess.run([sys.executable, "-c", make], env={**env, "PYTHONPATH": str(REPO)}, check=True, cwd=home)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.runs):
            for path in args.paths.split(","):
                for name, tree in trees.items():
                    # cwd: a folder with no dal in it (``-c`` puts the working directory first on sys.path)
                    out = subprocess.run([sys.executable, "-c", SCRIPT, path], env={**env, "PYTHONPATH": tree},
                                         capture_output=True, text=True, check=True, cwd=home)  # fmt: skip
                    times.setdefault((name, path), []).append(float(out.stdout.strip().splitlines()[-1]))
    for (name, path), found in sorted(times.items()):
        print(f"{path:6} {name:9} " + " ".join(f"{t:.2f}" for t in sorted(found)))


if __name__ == "__main__":
    main()
