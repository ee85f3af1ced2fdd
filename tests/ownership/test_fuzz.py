"""A seeded destructive-op fuzz over the CLI and the API, against canary sandboxes: random ``--dir`` (the
sandbox itself with its canaries, canary folders, datasets, caches, cache entries, links, missing folders),
random gc / purge arguments, links planted at random where dal deletes, orders shuffled, and CLI processes
killed at random moments. Counts the canaries touched: there must be none, and every refusal must be a
``DalError`` (one line from the CLI), never a crash. Bounded: a few local sandboxes and one on the S3 emulator.

``DAL_FUZZ_SEED`` replays another seed; the figures are printed (``pytest -s``)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError
from dal.ops import lifecycle
from dal.spark import convert_cache
from dal.storage import rangecache
from dal.storage.location import Location
from tests.ownership.canaries import KEY, S3Sandbox, Sandbox, local_world, petastorm_rows, s3_world

SEED = int(os.environ.get("DAL_FUZZ_SEED", "22"))
LOCAL_SANDBOXES = 4
LOCAL_OPS = 50  # per sandbox
S3_OPS = 40
KILLS = 4  # CLI processes killed mid-run, over the local sandboxes
REPO = Path(__file__).resolve().parents[2]
DATASETS = ("c.delta", "c.pet")  # c.other, their neighbour in the parent folder, is a canary


class Fuzz:
    """One sandbox's run: the operations done, the canaries touched, the crashes (non-DalError failures)."""

    def __init__(self, rng: random.Random, sb: Sandbox, catalog: str) -> None:
        self.rng, self.sb, self.catalog = rng, sb, catalog
        self.ops: Counter[str] = Counter()
        self.touched: set[str] = set()
        self.crashes: list[str] = []
        self.last = ""  # the last operation, as done (for the report of what touched a canary)
        self.culprits: list[str] = []

    def dirs(self) -> list[Path]:
        """Where a random ``--dir`` points: everything in the sandbox, two levels deep, links and missing ones."""
        base = self.sb.base
        found = [base, base / "missing", base / "cache" / "missing"]
        for top in sorted(base.iterdir()):
            found.append(top)
            if top.is_dir() and not top.is_symlink():
                found += sorted(top.iterdir())[:6]
        return found

    def cli(self, *args: str) -> None:
        self.last = f"dal {' '.join(args)}"
        r = CliRunner().invoke(cli, ["--catalog", self.catalog, *args])
        refused = "dal: error:" in r.output or '"exit_code": ' in r.output  # one line, or --json's object
        if r.exit_code != 0 and (not isinstance(r.exception, SystemExit) or not refused):
            self.crashes.append(f"dal {' '.join(args)}: {r.exception!r} {r.output[-300:]}")

    def api(self, what: str, fn: Callable[[], Any]) -> None:
        self.last = what
        try:
            fn()
        except DalError:
            pass
        except Exception as e:  # a crash is what the fuzz reports
            self.crashes.append(f"{what}: {e!r}")

    def run(self, op: str) -> None:
        self.ops[op] += 1
        self.last = op
        getattr(self, f"op_{op}")()
        changed = set(self.sb.touched()) - self.touched
        if changed:
            self.culprits.append(f"{self.last}: {sorted(changed)}")
        self.touched |= changed

    # -- the operations --------------------------------------------------------------------------------

    def op_cache_clear(self) -> None:
        where = str(self.rng.choice(self.dirs()))
        self.cli("cache", "clear", "--dir", where, *self.rng.sample(["--force", "--json"], self.rng.randint(0, 2)))

    def op_files_clear(self) -> None:
        self.cli("cache", "clear", "--files", "--dir", str(self.rng.choice(self.dirs())))

    def op_cache_ls(self) -> None:
        self.cli(
            "cache", "ls", "--dir", str(self.rng.choice(self.dirs())), *(["--files"] if self.rng.random() < 0.5 else [])
        )

    def op_converter(self) -> None:
        root = self.rng.choice(self.dirs())
        self.api(f"convert_cache.begin({root})", lambda: convert_cache.discard(convert_cache.begin(root, KEY)))
        self.api(f"convert_cache.sweep({root})", lambda: convert_cache.sweep(root))

    def op_file_cache(self) -> None:
        root = self.rng.choice(self.dirs())

        def evict() -> None:
            cache = rangecache.FileCache.create(str(root), "1MB")
            rangecache._store(cache.root).evict(limit=1, incoming=1, protect_since=time.time())

        self.api(f"file cache eviction in {root}", evict)

    def op_gc(self) -> None:
        args = ["gc", self.rng.choice(DATASETS), "--keep-last", str(self.rng.randint(1, 3))]
        args += self.rng.sample(["--dry-run", "--force"], self.rng.randint(0, 1))
        self.cli(*args, "--safe-age", self.rng.choice(["0s", "1s", "1h"]))

    def op_purge(self) -> None:
        self.cli(
            "drop", self.rng.choice(DATASETS), "--purge", "--yes", *(["--force"] if self.rng.random() < 0.7 else [])
        )

    def op_write(self) -> None:
        name = self.rng.choice(DATASETS)
        if name == "c.delta":
            self.api(
                "write", lambda: dal.write(pa.table({"id": [self.rng.randint(0, 99)]}), name, catalog=self.catalog)
            )
        else:
            self.api("write", lambda: dal.write(petastorm_rows(9), name, catalog=self.catalog))

    def op_link(self) -> None:
        """A link where dal deletes (named as dal names things) to a canary."""
        base = self.sb.base
        targets = [base / "outside", base / "precious", base / "projectA", base / "outside" / "secret.parquet",
                   base / "notes.txt"]  # fmt: skip
        roots, canaries = self.sb.roots, list(self.sb.canaries)
        places = [  # inside a dataset or cache, never inside a canary (that would change the canary itself)
            p
            for p in self.dirs()
            if p.is_dir()
            and not p.is_symlink()
            and any(r == p or r in p.parents for r in roots)
            and not any(c == p or c in p.parents for c in canaries)
        ]
        names = ["date=2099-01-02", "part-00000-linked.parquet", f"{KEY}-0123456789ab", "0f", "shared", "_delta_log",
                 f"{'0' * 64}", "v7-0123456789ab"]  # fmt: skip
        if not places:
            return
        at = self.rng.choice(places) / self.rng.choice(names)
        if not os.path.lexists(at):
            target = self.rng.choice(targets)
            self.last = f"link {at} -> {target}"
            self.sb.link(at, target)

    def op_kill(self) -> None:
        """A destructive CLI command in its own process, killed at a random moment."""
        command = self.rng.choice(
            [
                ["cache", "clear", "--force", "--dir", str(self.rng.choice(self.dirs()))],
                ["gc", self.rng.choice(DATASETS), "--keep-last", "1", "--safe-age", "0s"],
                ["drop", self.rng.choice(DATASETS), "--purge", "--yes", "--force"],
            ]
        )
        self.last = f"killed: dal {' '.join(command)}"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "dal.cli", "--catalog", self.catalog, *command], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            proc.wait(self.rng.uniform(0.5, 2.5))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)


WEIGHTS = {"cache_clear": 6, "files_clear": 4, "cache_ls": 1, "converter": 4, "file_cache": 3, "gc": 6, "purge": 2,
           "write": 2, "link": 5}  # fmt: skip


@pytest.mark.slow
def test_destructive_op_fuzz_touches_no_canary(
    tmp_path: Path, sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    runs: list[Fuzz] = []
    kills_at = set(rng.sample(range(LOCAL_SANDBOXES * LOCAL_OPS), KILLS))
    for i in range(LOCAL_SANDBOXES):
        catalog = f"sqlite:///{tmp_path}/catalog-{i}.db"
        monkeypatch.setenv("DAL_CATALOG_URL", catalog)
        fuzz = Fuzz(rng, local_world(Sandbox(tmp_path / f"sandbox-{i}")), catalog)
        for j in range(LOCAL_OPS):
            fuzz.run("kill" if i * LOCAL_OPS + j in kills_at else rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0])
        convert_cache.release_all()
        fuzz.run("cache_clear")  # after this process's own entries were released
        runs.append(fuzz)
    local_s = time.monotonic() - started
    s3_run = s3_fuzz(rng, s3, tmp_path, monkeypatch)
    s3_s = time.monotonic() - started - local_s

    ops = sum(sum(f.ops.values()) for f in runs) + s3_run[0]
    touched = sorted(set().union(*(f.touched for f in runs)) | set(s3_run[1]))
    crashes = [c for f in runs for c in f.crashes] + s3_run[2]
    kinds = sum((f.ops for f in runs), Counter())
    print(f"\ndestructive-op fuzz (seed {SEED}): {ops} operations over {LOCAL_SANDBOXES} local sandboxes and 1 on "
          f"S3 ({s3_run[0]} there); canaries touched: {len(touched)}; crashes: {len(crashes)}; local ops: "
          f"{dict(sorted(kinds.items()))}; {local_s:.0f} s local, {s3_s:.0f} s on S3")  # fmt: skip
    assert touched == [], [c for f in runs for c in f.culprits]
    assert crashes == []
    assert kinds["kill"] == KILLS and all(kinds[k] for k in WEIGHTS)  # every kind of operation ran


def s3_fuzz(
    rng: random.Random, s3: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, list[str], list[str]]:
    """The same on the S3 emulator: random prefixes (the bucket root, canary prefixes, datasets, the cache)."""
    bucket, options = s3
    monkeypatch.setattr(convert_cache, "STARTING_GRACE_S", 0.0)  # objects cannot be backdated: all count as old
    monkeypatch.setenv("DAL_CATALOG_URL", f"sqlite:///{tmp_path}/catalog-s3.db")
    sb = S3Sandbox(bucket, options)
    base = s3_world(sb, "area")
    prefixes = [f"s3://{bucket}", base, f"{base}/cache", f"{base}/ds.delta", f"{base}/ds.petastorm", f"{base}/missing",
                f"s3://{bucket}/precious", f"s3://{bucket}/projectA", f"s3://{sb.victim}"]  # fmt: skip
    crashes: list[str] = []
    ops = 0
    for _ in range(S3_OPS):
        uri, which, name = rng.choice(prefixes), rng.choice(S3_CALLS), rng.choice(DATASETS)
        ops += 1
        try:
            s3_call(which, Location.of(uri, options), name, rng.random() < 0.6)
        except DalError:
            pass
        except Exception as e:  # a crash is what the fuzz reports
            crashes.append(f"s3 {which} {uri}: {e!r}")
    convert_cache.release_all()
    return ops, sb.touched(), crashes


S3_CALLS = ("clear", "sweep", "begin", "root", "gc", "purge")


def s3_call(which: str, root: Location, name: str, force: bool) -> None:
    """One destructive call at ``root`` (a cache's prefix, as it may be) or on the dataset ``name``."""
    options = dict(root.storage_options)
    if which == "clear":
        convert_cache.remote_clear(root, force=force)
    elif which == "sweep":
        convert_cache.remote_sweep(root)
    elif which == "begin":
        convert_cache.remote_discard(root, convert_cache.remote_begin(root, KEY))
    elif which == "root":
        convert_cache.remote_root(root.uri, options)
    elif which == "gc":
        lifecycle.gc(name, keep_last=1, safe_age=timedelta(0), storage_options=options)
    else:
        lifecycle.drop(name, purge=True, force=force, storage_options=options)
