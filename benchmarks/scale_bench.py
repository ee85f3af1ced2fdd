"""Planning at scale: dal's open + plan against delta-rs's load + file listing, measured in the same run.

    python benchmarks/scale_bench.py                      # 5,000 and 50,000 files, a 1,000,000-file log
    python benchmarks/scale_bench.py --sizes 5000 --log-only 200000 --s3 1000

Tables: Delta tables written by delta-rs with one partition (one file, one row) per ``part`` value; a
log-only table (``tests/reader/delta_log.py``: add actions with statistics in 1,000 partitions, a checkpoint, no
data files).
For each: a partition filter (``part = 77``), a statistics filter (``id = 777``, prunable by the log's
min/max) and no filter. dal: a fresh process opens the dataset and plans (``Scan.plan(row_groups=False)``: with
a filter, the row-group tasks, footers of the surviving files read; without one, one task per file from the log's
``numRecords``, no file opened, as columns (``FileTasks``: the files kept are its length; making every task an
object, which a rank does for its share only, is timed off the clock, as a column of its own); for the log-only
table, whose files do not exist, the files a filter keeps, and the plan without one). delta-rs: ``DeltaTable(...)`` plus ``file_uris(partition filter)`` / ``get_add_actions()``
(with statistics, which delta-rs does not prune by) / ``file_uris()``. Each measurement is a fresh process,
imports before the clock; ``--repeat`` rounds per table and filter, each round one dal and one delta-rs
process, alternating which goes first (A B, B A, ...), so load elsewhere on the machine falls on both alike;
the table gives the min and the median of the rounds. dal's clock starts before the process's first
``dal.open`` (the catalog connection included; that open's own time is a column too), and the one-time
``dal.register`` of each table (for the log-only table: its ``dal.sync``, the log read) is a column of its
own. CPU: the process tree's user + system seconds over the timed part (``proc_cpu``), median of the rounds.
Memory is the process's peak RSS, median of the rounds (imports included: pyarrow, delta-rs, dal ~
150-200 MB before any table).
``--s3 N``: a table of N files on the moto S3 emulator, and the requests planning makes there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.proc_cpu import tree_cpu_seconds  # noqa: E402

CASES = {"partition": "part = 77", "stats": "id = 777", "none": None}


def _rss_mb() -> float:
    """This process's peak RSS (``VmHWM``: since its exec; ``ru_maxrss`` would carry the parent's)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(engine: str, case: str, location: str, name: str, files_only: bool, options: dict[str, str]) -> None:
    """One measurement in this (fresh) process: prints seconds, files kept and peak RSS growth as JSON."""
    import deltalake

    import dal

    where = {"partition": dal.col("part") == 77, "stats": dal.col("id") == 777}.get(case)
    opened = 0.0
    cpu, t = tree_cpu_seconds(), time.perf_counter()
    if engine == "dal":
        ds = dal.open(name, storage_options=options or None)  # the process's first: the catalog connection too
        opened = time.perf_counter() - t
        scan = ds.scan() if where is None else ds.filter(where)
        tasks: Any = None
        if files_only and where is not None:  # the log-only table's files do not exist: the files kept
            kept = len(scan.query.files)
        else:  # the plan before any file is opened: file tasks without a filter (the log's counts), else row groups
            tasks = scan.plan(row_groups=False)  # without a filter: FileTasks, the log's columns (no object per file)
            kept = len(tasks) if where is None else len({task.uri for task in tasks})
    else:
        opts = dal.storage.uris.object_store_options(options) if options else None
        table = deltalake.DeltaTable(location, storage_options=opts)
        if case == "partition":
            kept = len(table.file_uris(partition_filters=[("part", "=", "77")]))
        elif case == "stats":
            kept = table.get_add_actions(flatten=True).num_rows  # delta-rs: the stats, unpruned
        else:
            kept = len(table.file_uris())
    out = {"seconds": time.perf_counter() - t, "cpu": tree_cpu_seconds() - cpu, "open": opened, "kept": kept}
    if engine == "dal" and where is None and tasks is not None:  # off the clock: every task made an object
        t = time.perf_counter()
        assert len({task.uri for task in tasks}) == kept
        out["objects"] = time.perf_counter() - t
    out["rss_mb"] = _rss_mb()
    print(json.dumps(out))


def measure(engine: str, case: str, location: str, name: str, *, files_only: bool, env: dict[str, str],
            options: dict[str, str] | None = None) -> dict[str, float]:  # fmt: skip
    """One fresh process of ``engine`` (see ``child``)."""
    cmd = [sys.executable, __file__, "--child", engine, case, location, name, json.dumps(options or {})]
    if files_only:
        cmd.append("--files-only")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode:
        raise SystemExit(f"{engine} {case} on {location} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


Runs = list[dict[str, float]]


def interleaved(case: str, location: str, name: str, *, files_only: bool, rounds: int,
                env: dict[str, str]) -> tuple[Runs, Runs]:  # fmt: skip
    """``rounds`` rounds of one dal and one delta-rs process, the first of the pair alternating per round."""
    runs: dict[str, Runs] = {"dal": [], "delta-rs": []}
    for r in range(rounds):
        for engine in ("dal", "delta-rs") if r % 2 == 0 else ("delta-rs", "dal"):
            runs[engine].append(measure(engine, case, location, name if engine == "dal" else "",
                                        files_only=files_only, env=env))  # fmt: skip
    return runs["dal"], runs["delta-rs"]


def _stat(runs: Runs, key: str) -> tuple[float, float]:
    values = [r[key] for r in runs]
    return min(values), statistics.median(values)


def delta_rs_table(root: str, files: int, options: dict[str, str] | None = None) -> float:
    """``files`` one-row files, one partition each, written by delta-rs; returns the seconds it took."""
    import deltalake
    import pyarrow as pa

    t = time.perf_counter()
    data = pa.table({"id": pa.array(range(files), pa.int64()), "part": pa.array(range(files), pa.int64())})
    opts = None
    if options:
        import dal

        opts = dal.storage.uris.object_store_options(options)
    deltalake.write_deltalake(root, data, partition_by=["part"], storage_options=opts)
    return time.perf_counter() - t


def compile_dal() -> None:
    """dal's bytecode compiled, as an installed package has it (pip compiles on install; pyarrow's and delta-rs's
    are): under ``PYTHONDONTWRITEBYTECODE`` every fresh process would compile dal's ~200 modules again (~0.1 s CPU
    of a first ``dal.open``), which no user pays. Into ``dal/**/__pycache__`` (git ignores it)."""
    import compileall

    compileall.compile_dir(str(REPO / "dal"), quiet=1)


def report(rows: list[tuple[str, str, float, Runs, Runs]]) -> None:
    print(
        "| table | filter | dal register (once) | dal first open (median) | dal open + plan min / median | "
        "delta-rs load + list min / median | ratio min / median | CPU dal / delta-rs (median) | "
        "files kept (dal / delta-rs) | peak RSS dal / delta-rs (median) | dal: then every task an object (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for table, case, registered, d, r in rows:
        (d_min, d_med), (r_min, r_med) = _stat(d, "seconds"), _stat(r, "seconds")
        ratio = f"{d_min / r_min:.1f}x / {d_med / r_med:.1f}x" if r_min and r_med else "-"
        objects = f"+{_stat(d, 'objects')[1]:.3f} s" if all("objects" in x for x in d) else "-"
        print(
            f"| {table} | {CASES[case] or 'none'} | {registered:.2f} s | {_stat(d, 'open')[1]:.3f} s | "
            f"{d_min:.3f} / {d_med:.3f} s | {r_min:.3f} / {r_med:.3f} s | {ratio} | "
            f"{_stat(d, 'cpu')[1]:.2f} / {_stat(r, 'cpu')[1]:.2f} s | {int(d[0]['kept']):,} / {int(r[0]['kept']):,} | "
            f"{_stat(d, 'rss_mb')[1]:.0f} / {_stat(r, 'rss_mb')[1]:.0f} MB | {objects} |"
        )


def s3_requests(files: int, work: Path, env: dict[str, str], repeat: int) -> None:
    """A delta-rs table of ``files`` files on moto; requests the server logs while dal plans each case."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = work / "moto.log"
    log = open(log_path, "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        import boto3

        endpoint = f"http://127.0.0.1:{port}"
        options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                   "AWS_REGION": "us-east-1"}  # fmt: skip
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                     region_name="us-east-1").create_bucket(Bucket="scale")  # fmt: skip
        uri = f"s3://scale/t{files}"
        took = delta_rs_table(uri, files, options)
        import dal

        os.environ.update(env)
        t = time.perf_counter()
        dal.register(f"s3.t{files}", uri, format="delta", storage_options=options)
        registered = time.perf_counter() - t
        print(f"\nS3 (moto on loopback), {files:,} files written by delta-rs in {took:.0f} s, registered by dal "
              f"in {registered:.2f} s; one fresh process per filter:")  # fmt: skip
        print("| filter | requests while dal opens + plans | of which GET | time |")
        print("|---|---|---|---|")
        for case in CASES:
            log.flush()
            before = log_path.read_text().count("\n")
            got = measure("dal", case, uri, f"s3.t{files}", files_only=False, env=env, options=options)
            time.sleep(0.5)
            lines = log_path.read_text().splitlines()[before:]
            requests = [ln for ln in lines if re.search(r'"(GET|HEAD|PUT|POST|DELETE) ', ln)]
            gets = [ln for ln in requests if '"GET ' in ln]
            print(f"| {CASES[case] or 'none'} | {len(requests)} | {len(gets)} | {got['seconds']:.2f} s |")
    finally:
        server.terminate()
        server.wait()
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="5000,50000", help="files per delta-rs table (comma-separated)")
    ap.add_argument("--log-only", type=int, default=1_000_000, help="files of the log-only table (0: none)")
    ap.add_argument("--s3", type=int, default=0, help="files of a table on the moto S3 emulator (0: none)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds (one dal, one delta-rs process each)")
    ap.add_argument("--child", nargs=5)
    ap.add_argument("--files-only", action="store_true")
    args = ap.parse_args()
    if args.child:
        engine, case, location, name, options = args.child
        child(engine, case, location, name, args.files_only, json.loads(options))
        return
    work = Path(tempfile.mkdtemp(prefix="dal-scale-bench-"))
    env = dict(os.environ, DAL_HOME=str(work / "home"), PYTHONPATH=str(REPO))
    compile_dal()
    os.environ["DAL_HOME"] = env["DAL_HOME"]
    import dal

    rows = []
    try:
        for n in [int(x) for x in args.sizes.split(",") if x]:
            root = str(work / f"t{n}")
            took = delta_rs_table(root, n)
            t = time.perf_counter()
            dal.register(f"scale.t{n}", root, format="delta")
            registered = time.perf_counter() - t
            print(f"{n:,} files: written by delta-rs in {took:.0f} s, registered in {registered:.2f} s", flush=True)
            for case in CASES:
                d, r = interleaved(case, root, f"scale.t{n}", files_only=False, rounds=args.repeat, env=env)
                rows.append((f"{n:,} files", case, registered, d, r))
        if args.log_only:
            from tests.reader.delta_log import write_table

            n = args.log_only
            root = str(work / "log")
            clock: dict[str, float] = {}

            def register() -> None:  # before the add actions: the table is registered empty, then synced
                t = time.perf_counter()
                dal.register("scale.log", root, format="delta")
                clock["register"] = time.perf_counter() - t

            t = time.perf_counter()
            write_table(root, n, rows=1, parts=1000, unstated=0, placeholders=False, commits=1,
                        before_adds=register)  # fmt: skip
            made = time.perf_counter() - t - clock["register"]
            t = time.perf_counter()
            dal.sync("scale.log")
            synced = time.perf_counter() - t
            print(f"{n:,}-file log: written in {made:.0f} s, registered (empty) in {clock['register']:.2f} s, "
                  f"synced in {synced:.1f} s", flush=True)  # fmt: skip
            for case in CASES:
                d, r = interleaved(case, root, "scale.log", files_only=True, rounds=args.repeat, env=env)
                rows.append((f"{n:,} files (log only)", case, clock["register"] + synced, d, r))
        print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, {args.repeat} interleaved rounds of fresh "
              "processes (dal, delta-rs; the first alternating); min / median:\n")  # fmt: skip
        report(rows)
        if args.s3:
            s3_requests(args.s3, work, env, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
