"""The training feed: mid-epoch resumption, elastic (canonical-shard) order, same order in every process,
DataLoader workers shipping chunks, device placement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there

import dal  # noqa: E402
from dal.catalog import Catalog  # noqa: E402
from dal.errors import DalError  # noqa: E402

ROWS = 1003
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of ~100 rows (whole 50-row row groups) so that a small dataset has many of them."""
    import dal.read.reader

    monkeypatch.setattr(dal.read.reader, "MIN_CHUNK_ROWS", 100)
    monkeypatch.setattr(dal.read.reader, "CHUNK_BYTES", 1)


@pytest.fixture
def rows_ds(sqlite_env: Catalog, tmp_path: Path, small_chunks: None) -> dal.Dataset:
    root = tmp_path / "rows"
    root.mkdir()
    for k in range(3):
        ids = np.arange(k * 340, min((k + 1) * 340, ROWS))
        table = pa.table({"id": ids, "x": ids.astype(np.float32) / 2, "name": [f"n{i}" for i in ids]})
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=50)
    dal.register("t.resume", str(root), format="parquet")
    return dal.open("t.resume")


def ids_of(batches: list[dict[str, object]]) -> list[list[int]]:
    return [[int(i) for i in b["id"]] for b in batches]  # type: ignore[attr-defined]


def flat(xs: list[list[int]]) -> list[int]:
    return [i for x in xs for i in x]


def test_batches_are_slices_of_chunks_with_every_row_once(rows_ds: dal.Dataset) -> None:
    data = rows_ds.shuffle(seed=1, buffer_size=1).to_torch(batch_size=64)
    batches = ids_of(list(data))
    assert [len(b) for b in batches] == [64] * 15 + [ROWS - 15 * 64]
    assert sorted(flat(batches)) == list(range(ROWS)) and flat(batches) != list(range(ROWS))
    # rows are permuted inside each chunk of ~100 rows (two row groups), not only between row groups
    assert any(b != sorted(b) for b in batches)


@pytest.mark.parametrize("shuffle", [False, True])
def test_resume_reproduces_the_rest_of_the_epoch_per_rank(rows_ds: dal.Dataset, shuffle: bool) -> None:
    world, batch = 2, 25
    for rank in range(world):
        scan = rows_ds.shard(rank, world)
        scan = scan.shuffle(seed=7) if shuffle else scan
        data = scan.to_torch(batch)
        data.set_epoch(3)
        full = ids_of(list(data))
        # mid-chunk, a chunk boundary (the first chunk is two 50-row row groups: 4 batches), the last batch
        for stop in (1, 4, 9, len(full) - 1):
            data = scan.to_torch(batch)
            data.set_epoch(3)
            it = iter(data)
            seen = [next(it) for _ in range(stop)]
            state = data.state_dict()
            assert state["epoch"] == 3 and state["rows"] == sum(len(b["id"]) for b in seen)
            fresh = scan.to_torch(batch)
            fresh.load_state_dict(json.loads(json.dumps(state)))  # a plain, JSON-able dict
            assert ids_of(list(fresh)) == full[stop:]
            assert ids_of(list(fresh)) == full  # the next pass is a whole epoch again


def test_resume_through_worker_processes_and_same_batches_as_threads(rows_ds: dal.Dataset) -> None:
    scan = rows_ds.shuffle(seed=3)
    threads = ids_of(list(scan.to_torch(48).loader(num_workers=0)))
    workers = ids_of(list(scan.to_torch(48).loader(num_workers=2)))
    assert workers == threads and sorted(flat(threads)) == list(range(ROWS))
    # persistent workers serve every epoch: each pass reads the loader's current epoch
    loader = scan.to_torch(48).loader(num_workers=2)
    direct = scan.to_torch(48)
    for epoch in (0, 1, 0):
        loader.set_epoch(epoch)
        direct.set_epoch(epoch)
        assert ids_of(list(loader)) == ids_of(list(direct))
    loader = scan.to_torch(48).loader(num_workers=2)
    it = iter(loader)
    head = [next(it) for _ in range(7)]
    state = loader.state_dict()
    del it
    again = scan.to_torch(48).loader(num_workers=2)
    again.load_state_dict(state)
    assert ids_of(head) + ids_of(list(again)) == threads


def test_resume_refuses_another_version_seed_or_world(rows_ds: dal.Dataset) -> None:
    data = rows_ds.shuffle(seed=1).shard(0, 2).to_torch(16)
    state = data.state_dict()
    with pytest.raises(DalError, match="seed=1"):
        rows_ds.shuffle(seed=2).shard(0, 2).to_torch(16).load_state_dict(state)
    with pytest.raises(DalError, match="num_canonical_shards"):
        rows_ds.shuffle(seed=1).shard(0, 4).to_torch(16).load_state_dict(state)
    with pytest.raises(DalError, match="not a dal loader state"):
        data.load_state_dict({"epoch": 0})


CANONICAL, GLOBAL_BATCH = 12, 48


def steps(ds: dal.Dataset, world: int, state: dict[str, object] | None = None, stop: int | None = None):  # type: ignore[no-untyped-def]
    """Global batches (all ranks' batches of a step, rank order) at ``world`` ranks, and each rank's state."""
    per_rank = []
    states = []
    for rank in range(world):
        data = ds.shuffle(seed=9).shard(rank, world).to_torch(GLOBAL_BATCH // world, num_canonical_shards=CANONICAL)
        if state is not None:
            data.load_state_dict(state)
        it = iter(data)
        out = []
        for batch in it:
            out.append([int(i) for i in batch["id"]])
            if stop is not None and len(out) == stop:
                break
        per_rank.append(out)
        states.append(data.state_dict())
    assert len({len(r) for r in per_rank}) == 1  # every rank the same number of batches
    return [flat([r[t] for r in per_rank]) for t in range(len(per_rank[0]))], states


def test_elastic_order_is_the_same_at_any_world_size(rows_ds: dal.Dataset) -> None:
    one, _ = steps(rows_ds, 1)
    for world in (2, 3, 4):
        assert steps(rows_ds, world)[0] == one
    padded = flat(one)
    assert set(padded) == set(range(ROWS)) and len(padded) == -(-ROWS // CANONICAL) * CANONICAL


@pytest.mark.parametrize(("before", "after"), [(4, 2), (2, 3)])
def test_elastic_resume_at_another_world_size_loses_and_repeats_nothing(
    rows_ds: dal.Dataset, before: int, after: int
) -> None:
    whole, _ = steps(rows_ds, 1)
    head, states = steps(rows_ds, before, stop=5)
    assert len({json.dumps(s) for s in states}) == 1  # the same checkpoint on every rank
    tail, _ = steps(rows_ds, after, state=states[0])
    assert head + tail == whole


def test_same_order_in_another_process(rows_ds: dal.Dataset) -> None:
    mine = flat(ids_of(list(rows_ds.shuffle(seed=11).to_torch(100))))
    code = (
        "import dal, json, dal.read.reader as r; r.MIN_CHUNK_ROWS = 100; r.CHUNK_BYTES = 1; "
        "print(json.dumps([int(i) for b in dal.open('t.resume').shuffle(seed=11).to_torch(100) for i in b['id']]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == mine


def test_device_placement_api(rows_ds: dal.Dataset) -> None:
    (first, *_) = list(rows_ds.select("id").to_torch(500, device="cpu"))
    assert first["id"].device.type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(DalError, match="no CUDA device"):
            rows_ds.to_torch(64, device="cuda")
    with pytest.raises(DalError, match="device must be"):
        rows_ds.to_torch(64, device="tpu")


def test_a_vanished_file_is_a_dal_error_naming_the_version(rows_ds: dal.Dataset, tmp_path: Path) -> None:
    data = rows_ds.to_torch(64)  # planned: footers read
    (tmp_path / "rows" / "part-2.parquet").unlink()
    with pytest.raises(DalError, match=r"t.resume version \d+ .*no longer readable"):
        list(data)
    state = rows_ds.to_torch(64).state_dict()
    state["rows"] = 10
    resumed = rows_ds.to_torch(64)
    resumed.load_state_dict(state)
    with pytest.raises(DalError, match="no longer readable"):
        list(resumed)


def test_resume_refuses_a_scan_that_reads_other_rows(sqlite_env: Catalog, small_chunks: None) -> None:
    """A state records what decides the rows and their order: filters and window, columns (they size the
    chunks a shuffle permutes inside), the shuffle buffer and the shard's remainder (issue #23 item 10: a
    state used to load silently into a differently filtered loader)."""
    from datetime import datetime, timedelta

    n = 400
    ts = [datetime(2026, 1, 1) + timedelta(minutes=i) for i in range(n)]
    dal.write(pa.table({"id": np.arange(n), "ts": ts, "x": np.arange(n) / 2}), "t.conf", time_column="ts")
    ds = dal.open("t.conf")
    base = ds.filter("id >= 40").window("2026-01-01T00:00", "2026-01-01T05:00").select("id", "ts")
    base = base.shuffle(seed=4, buffer_size=100).shard(0, 2, "drop")
    data = base.to_torch(16)
    it = iter(data)
    head = [next(it) for _ in range(3)]
    state = json.loads(json.dumps(data.state_dict()))
    assert state["where"] and "id >= 40" in state["where"] and state["columns"] == ["id", "ts"]
    assert state["buffer"] == 100 and state["remainder"] == "drop"
    same = ds.filter("id >= 40").window("2026-01-01T00:00", "2026-01-01T05:00").select("id", "ts")
    same = same.shuffle(seed=4, buffer_size=100).shard(0, 2, "drop").to_torch(16)
    same.load_state_dict(state)  # the same scan, built again: accepted, and exact
    assert ids_of(head) + ids_of(list(same)) == ids_of(list(base.to_torch(16)))
    window = ("2026-01-01T00:00", "2026-01-01T05:00")
    others = {
        "no filter": ds.window(*window).select("id", "ts").shuffle(seed=4, buffer_size=100).shard(0, 2, "drop"),
        "other filter": ds.filter("id >= 41").window(*window).select("id", "ts").shuffle(4, 100).shard(0, 2, "drop"),
        "no window": ds.filter("id >= 40").select("id", "ts").shuffle(seed=4, buffer_size=100).shard(0, 2, "drop"),
        "other window": ds.filter("id >= 40").window("2026-01-01T00:00", "2026-01-01T04:00").select("id", "ts")
        .shuffle(seed=4, buffer_size=100).shard(0, 2, "drop"),
        "columns": ds.filter("id >= 40").window(*window).select("id").shuffle(seed=4, buffer_size=100).shard(0, 2, "drop"),
        "buffer": ds.filter("id >= 40").window(*window).select("id", "ts").shuffle(seed=4, buffer_size=50).shard(0, 2, "drop"),
        "remainder": ds.filter("id >= 40").window(*window).select("id", "ts").shuffle(seed=4, buffer_size=100).shard(0, 2),
    }  # fmt: skip
    for what, scan in others.items():
        key = {"columns": "columns", "buffer": "buffer", "remainder": "remainder"}.get(what, "where")
        with pytest.raises(DalError, match=f"saved with {key}=.*this loader has {key}=") as info:
            scan.to_torch(16).load_state_dict(state)
        assert "t.conf" in str(info.value), what


def test_a_state_from_before_these_records_loads_where_they_change_nothing(rows_ds: dal.Dataset) -> None:
    data = rows_ds.shard(1, 2).to_torch(16)
    it = iter(data)
    head = [next(it) for _ in range(5)]
    state = data.state_dict()
    older = {k: v for k, v in state.items() if k not in ("where", "columns", "buffer", "remainder")}
    again = rows_ds.shard(1, 2).to_torch(16)
    again.load_state_dict(older)
    assert ids_of(head) + ids_of(list(again)) == ids_of(list(rows_ds.shard(1, 2).to_torch(16)))
    with pytest.raises(DalError, match="no where recorded"):
        rows_ds.filter("id > 3").shard(1, 2).to_torch(16).load_state_dict(older)
    with pytest.raises(DalError, match="no remainder recorded"):
        rows_ds.shard(1, 2, "keep").to_torch(16).load_state_dict(older)
    whole = rows_ds.scan().to_torch(16)  # unsharded: no rank, no remainder
    older = {k: v for k, v in whole.state_dict().items() if k not in ("where", "columns", "buffer", "remainder")}
    rows_ds.scan().to_torch(16).load_state_dict(older)


def test_a_mix_state_records_its_members_rows(rows_ds: dal.Dataset) -> None:
    def mixed(where: str) -> object:
        return dal.mix([rows_ds.filter("id < 500"), rows_ds.filter(where)], seed=3).shard(0, 2).to_torch(16)

    data = mixed("id >= 500")
    it = iter(data)  # type: ignore[call-overload]
    head = [next(it) for _ in range(4)]
    state = data.state_dict()  # type: ignore[attr-defined]
    again = mixed("id >= 500")
    again.load_state_dict(state)  # type: ignore[attr-defined]
    assert ids_of(head) + ids_of(list(again)) == ids_of(list(mixed("id >= 500")))  # type: ignore[call-overload]
    with pytest.raises(DalError, match="saved with members="):
        mixed("id >= 600").load_state_dict(state)  # type: ignore[attr-defined]
