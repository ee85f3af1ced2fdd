"""Register, sync, ``dal head`` and ``dal stats`` of many-file Delta tables against delta-rs's own load, interleaved (issue #34).

    python benchmarks/register_bench.py                          # 5,000 and 50,000 files, 3 rounds
    python benchmarks/register_bench.py --sizes 50000 --commits 1,100 --repeat 5

Tables: ``benchmarks/many_files.py`` (tiny files of 10 rows in 100 partitions, a log with statistics, written as
another writer would: dal compares their counts with footers). Every figure is a fresh process (imports and,
for dal, the catalog connection before the clock) and, per round, one dal and one delta-rs process whose order
alternates (A B, B A, ...), so load elsewhere on the machine falls on both alike; min and median of the rounds.
CPU is the process tree's user + system seconds over the timed part (``proc_cpu``: threads, reaped children
and live descendants).

- register: ``dal.register`` into a fresh catalog vs ``DeltaTable(...)`` + ``get_add_actions(flatten=True)``;
- sync of one new commit (10 files), after each of ``--appends`` commits: ``dal.sync`` vs ``DeltaTable(...)``
  (what a fresh process needs to see the commit);
- ``dal head -n 3`` (``lifecycle.head``, its ``dal.open`` on the clock) vs ``DeltaTable(...)`` and the first
  row group of its first file;
- ``dal stats`` (``lifecycle.stats``, its ``dal.open`` on the clock) vs ``DeltaTable(...)`` +
  ``get_add_actions(flatten=True)`` (the log's per-file statistics, which ``dal stats`` now reads instead of
  one footer per file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.many_files import append, make_table  # noqa: E402
from benchmarks.proc_cpu import tree_cpu_seconds  # noqa: E402
from benchmarks.scale_bench import compile_dal  # noqa: E402


def child(kind: str, engine: str, root: str, name: str) -> None:
    """One timed measurement in this fresh process; prints {"seconds", "cpu", ...} as JSON."""
    import deltalake
    import pyarrow.parquet as pq

    import dal
    from dal.ops import lifecycle

    out: dict[str, Any] = {}
    if engine == "dal":
        if kind == "register":
            claim = Path(root, "_dal_catalog.json")
            claim.unlink(missing_ok=True)  # a fresh catalog each round; the previous round's claim is its own
        dal.get_catalog()  # connected (and created) before the clock
    cpu, t = tree_cpu_seconds(), time.perf_counter()
    if engine == "dal" and kind == "register":
        out["versions"] = len(dal.register(name, root, format="delta"))
    elif engine == "dal" and kind == "sync":
        out["versions"] = len(dal.sync(name))
    elif engine == "dal" and kind == "stats":
        out["columns"] = len(lifecycle.stats(name).columns)
    elif engine == "dal":
        out["rows"] = len(lifecycle.head(name, n=3)[1])
    else:
        table = deltalake.DeltaTable(root)
        if kind in ("register", "stats"):
            out["files"] = table.get_add_actions(flatten=True).num_rows
        elif kind == "head":
            first = sorted(table.file_uris())[0]
            out["rows"] = pq.ParquetFile(first).read_row_group(0).slice(0, 3).num_rows
    out["seconds"], out["cpu"] = time.perf_counter() - t, tree_cpu_seconds() - cpu
    print(json.dumps(out))


def measure(kind: str, engine: str, root: str, name: str, env: dict[str, str]) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", kind, engine, root, name]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{engine} {kind} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def rounds(kind: str, root: str, name: str, n: int, env: dict[str, str]) -> dict[str, list[dict[str, float]]]:
    """``n`` rounds of one dal and one delta-rs process, the first of the pair alternating."""
    runs: dict[str, list[dict[str, float]]] = {"dal": [], "delta-rs": []}
    for r in range(n):
        for engine in ("dal", "delta-rs") if r % 2 == 0 else ("delta-rs", "dal"):
            runs[engine].append(measure(kind, engine, root, name, env))
    return runs


def row(label: str, runs: dict[str, list[dict[str, float]]]) -> str:
    def s(engine: str, key: str) -> tuple[float, float]:
        values = [r[key] for r in runs[engine]]
        return min(values), statistics.median(values)

    (d_min, d_med), (r_min, r_med) = s("dal", "seconds"), s("delta-rs", "seconds")
    return (
        f"| {label} | {d_min:.3f} / {d_med:.3f} s | {s('dal', 'cpu')[1]:.2f} s | {r_min:.3f} / {r_med:.3f} s | "
        f"{s('delta-rs', 'cpu')[1]:.2f} s | {d_min / r_min:.1f}x / {d_med / r_med:.1f}x | "
        f"{s('dal', 'cpu')[1] / max(s('delta-rs', 'cpu')[1], 0.01):.1f}x |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="5000,50000", help="files per table (comma-separated)")
    ap.add_argument("--commits", default="1", help="commits each table's files come in (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds per figure")
    ap.add_argument("--appends", type=int, default=3, help="one-commit syncs measured per table")
    ap.add_argument("--child", nargs=4)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    compile_dal()  # as an installed package has it (scale_bench.compile_dal)
    work = Path(tempfile.mkdtemp(prefix="dal-register-bench-"))
    lines = []
    try:
        for files in [int(x) for x in args.sizes.split(",") if x]:
            for commits in [int(x) for x in args.commits.split(",") if x]:
                root = str(work / f"t{files}-{commits}")
                t = time.perf_counter()
                make_table(root, files, commits=commits)
                print(f"{files:,} files in {commits} commit(s): made in {time.perf_counter() - t:.1f} s", flush=True)
                label = f"{files:,} files, {commits} commit(s)"
                # each register round in a catalog of its own; the last one's is kept for sync and head
                envs = [dict(os.environ, DAL_HOME=str(work / f"home-{files}-{commits}-{r}"), PYTHONPATH=str(REPO),
                             DAL_PROGRESS="0") for r in range(args.repeat)]  # fmt: skip
                runs: dict[str, list[dict[str, float]]] = {"dal": [], "delta-rs": []}
                for r, env in enumerate(envs):
                    for engine in ("dal", "delta-rs") if r % 2 == 0 else ("delta-rs", "dal"):
                        runs[engine].append(measure("register", engine, root, "bench.t", env))
                lines.append(row(f"register: {label}", runs))
                env = envs[-1]
                lines.append(row(f"`dal head -n 3`: {label}", rounds("head", root, "bench.t", args.repeat, env)))
                lines.append(row(f"`dal stats`: {label}", rounds("stats", root, "bench.t", args.repeat, env)))
                for k in range(args.appends):
                    append(root, files + 10 * k, 10)
                    one = {"dal": [measure("sync", "dal", root, "bench.t", env)],
                           "delta-rs": [measure("sync", "delta-rs", root, "bench.t", env)]}  # fmt: skip
                    lines.append(row(f"sync of one 10-file commit ({k + 1}): {label}", one))
                print(lines[-args.appends - 2], flush=True)
        print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}; {args.repeat} interleaved rounds (syncs: one each), min / median:\n")  # fmt: skip
        print("| what | dal | dal CPU (median) | delta-rs | delta-rs CPU (median) | ratio | CPU ratio (median) |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
