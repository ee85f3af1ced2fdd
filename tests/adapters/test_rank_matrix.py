"""The deployment-shape matrix of the torch feed: which rows each DDP rank reads, checked by row id.

Launchers (``torch.multiprocessing.spawn``; a torchrun-style env launch) x paths (direct iteration,
``DataLoader(w)``, ``.loader(w)``, torchdata's ``StatefulDataLoader``) x worker start methods (fork, spawn,
forkserver) x rank implicit (from torch.distributed) or explicit (``.shard``): world size 2, 2 workers,
gloo. Every rank's rows must be disjoint from the other's, repeat nothing, and cover the dataset.
Issue #23 item 1: with spawn/forkserver workers the implicit rank was asked inside the worker, where no
process group exists, so every rank read the whole dataset.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("torch")
pytest.importorskip("torchdata")

import dal
from dal.catalog import Catalog
from tests.adapters.rank_matrix import combinations

REPO = Path(__file__).resolve().parents[2]
ROWS = 1002  # 501 rows per rank (no padding), split 250/251 between a rank's two workers
LAUNCHERS = ("mp.spawn", "env")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(launcher: str, out: Path) -> list[subprocess.Popen[str]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(k, None)
    command = [sys.executable, "-m", "tests.adapters.rank_matrix", launcher, str(out)]
    if launcher == "mp.spawn":
        return [
            subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        ]
    return [
        subprocess.Popen(
            command,
            cwd=REPO,
            env={**env, "RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "2"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]


def _problem(shares: list[object]) -> str | None:
    """What is wrong with the two ranks' row ids of one combination (None: disjoint, no repeats, covering)."""
    errors = [s for s in shares if isinstance(s, str)]
    if errors:
        return errors[0].splitlines()[0]
    ids = [list(s) for s in shares]  # type: ignore[call-overload]
    sets = [set(i) for i in ids]
    repeated = [len(i) - len(s) for i, s in zip(ids, sets, strict=True)]
    shared = len(sets[0] & sets[1])
    missing = ROWS - len(sets[0] | sets[1])
    if any(repeated) or shared or missing or (sets[0] | sets[1]) != set(range(ROWS)):
        return f"rows per rank {[len(i) for i in ids]}, repeated {repeated}, shared by both ranks {shared}, missing {missing}"
    return None


@pytest.mark.slow
def test_every_rank_reads_a_disjoint_share_in_every_deployment_shape(sqlite_env: Catalog, tmp_path: Path) -> None:
    ids = np.random.default_rng(3).permutation(ROWS)  # row ids in no particular order across the files
    for part in np.array_split(ids, 3):  # three files
        dal.write(pa.table({"id": part, "x": part.astype(np.float32)}), "matrix.rows")
    outs = {launcher: tmp_path / launcher.replace(".", "_") for launcher in LAUNCHERS}
    procs = {}
    for launcher, out in outs.items():
        out.mkdir()
        procs[launcher] = _launch(launcher, out)
    logs = {}
    for launcher, group in procs.items():
        for p in group:
            try:
                logs[launcher] = p.communicate(timeout=1500)[0]  # a hang guard: ~1.5 min on 2 idle cores
            except subprocess.TimeoutExpired:
                for q in [q for g in procs.values() for q in g]:
                    q.kill()
                pytest.fail(f"the {launcher} launch did not finish")
            assert p.returncode == 0, f"{launcher} launch failed:\n{logs[launcher][-4000:]}"
    failures = []
    for launcher, out in outs.items():
        ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
        assert sorted(ranks[0]) == sorted(ranks[1]) == sorted(combinations())
        for combination in combinations():
            problem = _problem([ranks[0][combination], ranks[1][combination]])
            if problem:
                failures.append(f"{launcher} {combination}: {problem}")
    assert len(combinations()) * len(LAUNCHERS) == 40  # the matrix: 2 x 2 x (direct + 3 paths x 3 start methods)
    assert not failures, f"{len(failures)} of 40 combinations wrong:\n" + "\n".join(failures)
