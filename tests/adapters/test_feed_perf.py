"""The fast feed's machinery: ``loader(num_workers)`` workers reusing shared-memory buffers (batches held by
the caller stay intact, abandoned passes free every buffer), chunks finished on several threads in the
same order as on one, tensor fields through the workers, torchdata's StatefulDataLoader over ``to_torch``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there

import dal  # noqa: E402
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema  # noqa: E402
from dal.catalog import Catalog  # noqa: E402
from dal.errors import DalError  # noqa: E402

ROWS = 1003


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of ~100 rows (whole 50-row row groups): many more chunks than a worker has buffers."""
    import dal.read.reader

    monkeypatch.setattr(dal.read.reader, "MIN_CHUNK_ROWS", 100)
    monkeypatch.setattr(dal.read.reader, "CHUNK_BYTES", 1)


@pytest.fixture
def rows_ds(sqlite_env: Catalog, tmp_path: Path, small_chunks: None) -> dal.Dataset:
    root = tmp_path / "rows"
    root.mkdir()
    for k in range(3):
        ids = np.arange(k * 340, min((k + 1) * 340, ROWS))
        table = pa.table(
            {
                "id": ids,
                "x": ids.astype(np.float32) / 2,
                "v": pa.array([[float(i), -float(i)] for i in ids], pa.list_(pa.float64())),  # one (batch, 2) tensor
                "name": [f"n{i}" for i in ids],
            }
        )
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=50)
    dal.register("t.feed", str(root), format="parquet")
    return dal.open("t.feed")


def ids_of(batches: list[dict[str, object]]) -> list[list[int]]:
    return [[int(i) for i in b["id"]] for b in batches]  # type: ignore[attr-defined]


def check_rows(batches: list[dict[str, object]]) -> None:
    """Every column of every batch agrees with its ids (what the files hold), checked after the pass."""
    for b in batches:
        ids = np.asarray(b["id"])
        assert np.array_equal(np.asarray(b["x"]), ids.astype(np.float32) / 2)
        assert np.array_equal(np.asarray(b["v"]), np.stack([ids, -ids], axis=1).astype(np.float64))
        assert b["name"] == [f"n{i}" for i in ids]


@pytest.mark.parametrize("prefetch", [1, 3])
def test_worker_buffers_are_reused_but_held_batches_stay_intact(rows_ds: dal.Dataset, prefetch: int) -> None:
    scan = rows_ds.shuffle(seed=5, buffer_size=1)
    direct = scan.to_torch(48)
    loader = scan.to_torch(48).loader(num_workers=2, prefetch_factor=prefetch)
    for epoch in (0, 1):
        direct.set_epoch(epoch)
        loader.set_epoch(epoch)
        held = list(loader)  # ~10 chunks per worker through prefetch+2 buffers each, every batch kept
        assert ids_of(held) == ids_of(list(direct))
        assert sorted(i for b in ids_of(held) for i in b) == list(range(ROWS))
        check_rows(held)  # checked after the pass: a reused buffer would have overwritten early batches
        assert [b["x"].dtype for b in held[:1]] == [torch.float32] and held[0]["v"].shape == (48, 2)


def test_an_abandoned_pass_frees_the_worker_buffers(rows_ds: dal.Dataset) -> None:
    loader = rows_ds.scan().to_torch(32).loader(num_workers=2, prefetch_factor=1)
    whole = ids_of(list(loader))
    for stop in (1, 7, 25):  # the workers are ahead by every buffer they have when the pass is dropped
        it = iter(loader)
        head = [next(it) for _ in range(stop)]
        assert ids_of(head) == whole[:stop]
        del it
        again = list(loader)  # the same persistent workers, a new pass
        assert ids_of(again) == whole
        check_rows(again)


def test_chunks_finished_on_threads_keep_the_one_thread_order(
    rows_ds: dal.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dal.read.reader

    scan = rows_ds.shuffle(seed=9, buffer_size=1)
    orders = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(dal.read.reader, "FINISH_THREADS", threads)
        orders[threads] = [ids_of(list(scan.set_epoch(e).to_torch(64))) for e in (0, 1)]
    assert orders[1] == orders[2] == orders[3]
    assert orders[1][0] != orders[1][1]  # each epoch its own order
    # resuming mid-chunk on the threaded path: the rows not yet seen, in order
    data = scan.to_torch(64)
    it = iter(data)
    head = [next(it) for _ in range(5)]
    fresh = scan.to_torch(64)
    fresh.load_state_dict(data.state_dict())
    assert ids_of(head) + ids_of(list(fresh)) == orders[1][0]


def test_tensor_fields_through_worker_buffers(sqlite_env: Catalog) -> None:
    schema = TensorSchema(
        "T",
        [
            TensorField("id", np.int64, (), ScalarCodec()),
            TensorField("arr", np.float32, (4, 3), NdarrayCodec()),
        ],
    )
    n = 300
    arrays = np.arange(n * 12, dtype=np.float32).reshape(n, 4, 3)
    dal.write({"id": np.arange(n), "arr": list(arrays)}, "t.tensors", format="petastorm", schema=schema)
    scan = dal.open("t.tensors").scan()
    batches = list(scan.to_torch(64).loader(num_workers=2))
    ids = torch.cat([b["id"] for b in batches])
    assert sorted(ids.tolist()) == list(range(n))
    got = torch.cat([b["arr"] for b in batches])
    assert got.dtype == torch.float32 and got.shape == (n, 4, 3)
    assert np.array_equal(got.numpy(), arrays[ids.numpy()])  # against the arrays written


@pytest.mark.parametrize("workers", [0, 2])
def test_torchdata_stateful_dataloader_resumes_exactly(rows_ds: dal.Dataset, workers: int) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    scan = rows_ds.shuffle(seed=3, buffer_size=1)

    def loader() -> StatefulDataLoader:
        return StatefulDataLoader(scan.to_torch(50), batch_size=None, num_workers=workers)

    whole = ids_of(list(loader()))
    assert sorted(i for b in whole for i in b) == list(range(ROWS))
    for stop in (1, 6, len(whole) - 1):  # mid-chunk, later, the last batch
        first = loader()
        it = iter(first)
        head = [next(it) for _ in range(stop)]
        state = first.state_dict()
        del it
        again = loader()
        again.load_state_dict(state)
        assert ids_of(head) + ids_of(list(again)) == whole


def test_a_worker_state_is_refused_in_the_main_process(rows_ds: dal.Dataset) -> None:
    from torch.utils.data import DataLoader

    class Saving(torch.utils.data.IterableDataset):  # type: ignore[misc]
        """Saves the dataset's state inside the worker, after its first batch."""

        def __init__(self, data: object) -> None:
            self.data = data

        def __iter__(self):  # type: ignore[no-untyped-def]
            batch = next(iter(self.data))  # type: ignore[call-overload]
            yield {"state": self.data.state_dict(), "n": len(batch["id"])}  # type: ignore[attr-defined]

    data = rows_ds.scan().to_torch(50)
    saved = [b for b in DataLoader(Saving(data), batch_size=None, num_workers=2)]
    state = saved[0]["state"]
    assert state["worker"] in ([0, 2], [1, 2]) and state["rows"] == 50
    with pytest.raises(DalError, match="saved in DataLoader worker"):
        rows_ds.scan().to_torch(50).load_state_dict(state)


def test_workers_restarted_every_pass_send_their_new_buffers(rows_ds: dal.Dataset) -> None:
    scan = rows_ds.shuffle(seed=6, buffer_size=1)
    direct = scan.to_torch(40)
    loader = scan.to_torch(40).loader(num_workers=2, persistent_workers=False, prefetch_factor=1)
    for epoch in (0, 1, 2):  # new worker processes each pass: new buffers, never mistaken for the old ones
        direct.set_epoch(epoch)
        loader.set_epoch(epoch)
        held = list(loader)
        assert ids_of(held) == ids_of(list(direct))
        check_rows(held)


def test_a_plain_dataloader_ships_batches_through_the_pipe(rows_ds: dal.Dataset) -> None:
    from torch.utils.data import DataLoader

    data = rows_ds.scan().to_torch(64)
    batches = list(DataLoader(data, batch_size=None, num_workers=2))
    assert sorted(i for b in ids_of(batches) for i in b) == list(range(ROWS))
    check_rows(batches)  # float32, float64 (n, 2) at aligned offsets, strings as lists
    assert all(type(b) is dict and b["v"].dtype == torch.float64 for b in batches)
    assert batches[0]["x"].is_contiguous() and batches[0]["v"].shape[1:] == (2,)


def _thread_marked(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A transform recording where a chunk was converted: 1 on the process's main thread, 0 elsewhere."""
    import threading

    on_main = int(threading.current_thread() is threading.main_thread())
    return batch.append_column("main", pa.array(np.full(batch.num_rows, on_main, np.int8)))


def test_plain_dataloader_workers_read_on_their_own_thread(rows_ds: dal.Dataset) -> None:
    """Inside a plain DataLoader's workers a chunk is read and converted on the worker's own thread (no dal
    reader threads beside its queue feeder: less CPU per row on few cores); in the main process on reader
    threads, as before. Same rows by id, shuffled or not, as read in one process."""
    from torch.utils.data import DataLoader

    schema = pa.schema([("id", pa.int64()), ("x", pa.float32()), ("main", pa.int8())])
    for scan in (rows_ds.scan().select("id", "x"), rows_ds.scan().select("id", "x").shuffle(seed=3)):
        data = scan.to_torch(64, transform=_thread_marked, output_schema=schema)
        direct = list(data)
        assert all(int(m) == 0 for b in direct for m in b["main"])  # reader threads here
        ctx = torch.multiprocessing.get_context("fork")
        got = list(DataLoader(data, batch_size=None, num_workers=2, multiprocessing_context=ctx))
        assert all(int(m) == 1 for b in got for m in b["main"])  # the worker's own thread
        assert sorted(i for b in ids_of(got) for i in b) == sorted(i for b in ids_of(direct) for i in b)
        assert sorted(i for b in ids_of(got) for i in b) == list(range(ROWS))
        assert all(np.array_equal(np.asarray(b["x"]), np.asarray(b["id"]).astype(np.float32) / 2) for b in got)


def test_plain_dataloader_batches_arrive_bit_exact_in_every_dtype(sqlite_env: Catalog, tmp_path: Path) -> None:
    """A plain DataLoader worker ships each batch as one buffer (NumPy views per column, torch bytes for
    dtypes NumPy lacks): every dtype arrives with its values, shape and column order, writable."""
    from torch.utils.data import DataLoader

    from dal.adapters.torch import _Shipped

    n = 700
    ids = np.arange(n)
    rng = np.random.default_rng(5)
    table = pa.table(
        {
            "name": [f"n{i}" for i in ids],  # a list of str between tensor columns: order kept
            "id": ids,
            "i8": (ids % 256 - 128).astype(np.int8),
            "u8": (ids % 256).astype(np.uint8),
            "h": rng.standard_normal(n).astype(np.float16),
            "flag": ids % 3 == 0,
            "d": rng.standard_normal(n),
            "v": pa.array([[float(i), -float(i), 0.5] for i in ids], pa.list_(pa.float32())),  # (batch, 3)
        }
    )
    root = tmp_path / "dtypes"
    root.mkdir()
    pq.write_table(table, root / "part-0.parquet", row_group_size=100)
    dal.register("t.dtypes", str(root), format="parquet")
    data = dal.open("t.dtypes").to_torch(64)
    direct = {int(i): b for b in data for i in b["id"]}  # rows keyed by id, read in this process
    got = list(DataLoader(data, batch_size=None, num_workers=2))
    assert sorted(int(i) for b in got for i in b["id"]) == list(range(n))
    for b in got:
        assert list(b) == table.column_names
        b["d"].add_(0)  # writable: no read-only buffer under the tensors
        for j, i in enumerate(b["id"].tolist()):
            ref = direct[i]
            k = ref["id"].tolist().index(i)
            for c in table.column_names:
                if c == "name":
                    assert b[c][j] == ref[c][k]
                else:
                    assert b[c].dtype == ref[c].dtype and torch.equal(b[c][j], ref[c][k]), c
    # dtypes NumPy has not (bfloat16), strided, empty and 0-d tensors travel too, with any pickle protocol
    odd = _Shipped(
        {
            "bf": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
            "t": torch.arange(6).view(2, 3).t(),
            "none": torch.zeros(0, 3, dtype=torch.bfloat16),
            "s": ["a"],
            "one": torch.tensor(2.5, dtype=torch.float64),
            "empty": torch.zeros(0, dtype=torch.int16),
        },
        "x",
    )
    import pickle

    for protocol in (4, 5):
        back = pickle.loads(pickle.dumps(odd, protocol=protocol))
        assert list(back) == list(odd) and back["s"] == ["a"]
        for k, v in odd.items():
            if k != "s":
                assert back[k].dtype == v.dtype and back[k].shape == v.shape and torch.equal(back[k], v), k
        back["bf"].add_(1)  # writable


def test_a_batch_straddling_two_chunks_is_joined_bit_exact_in_every_dtype() -> None:
    """A batch taken from the end of one chunk and the start of the next is one copy of each part: through
    NumPy for the dtypes it holds (single-threaded: torch.cat's OpenMP copy spun threads that took the cores
    from the readers), through torch.cat for the rest (bfloat16); values, dtype and shape as torch.cat gives."""
    from dal.adapters.torch import _join

    gen = torch.Generator().manual_seed(5)
    dtypes = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
              torch.float32, torch.float64, torch.bool, torch.complex64)  # fmt: skip
    for dtype in dtypes:
        whole = (torch.randn(7, 3, 4, generator=gen) * 100).to(dtype)
        turned = whole.transpose(1, 2)  # non-contiguous parts
        for x, y in ((whole[:3], whole[3:]), (whole[:3, :, ::2], whole[3:, :, ::2]), (turned[:2], turned[2:])):
            strings = ({"s": np.array(["u"] * len(x), dtype=object)}, {"s": np.array(["v"] * len(y), dtype=object)})
            got = _join({"t": x, **strings[0]}, {"t": y, **strings[1]})
            want = torch.cat([x, y])
            assert got["t"].dtype == dtype and got["t"].shape == want.shape and torch.equal(got["t"], want), dtype
            assert list(got["s"]) == ["u"] * len(x) + ["v"] * len(y)
