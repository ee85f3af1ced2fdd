"""``dal.open(name, v).changes(since=s)``: the change read as a Scan, composed with everything a scan has.

The rows are checked against references dal did not compute: delta-rs's own reads of the table at each Delta
version (the set difference by row id of two versions' rows) and ``load_cdf`` where the table has a feed; then
select, filter (on the change columns too), shard, shuffle, to_torch (direct, DataLoader workers, resumption
mid-version), to_tf-free terminals (to_pandas, polars/duckdb through iter_chunks), and the refusals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.errors import DalError, FilterError
from tests.changes.helpers import delta_rs_read

REPO = Path(__file__).resolve().parents[2]


def _batch(ids: range, day: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "day": pa.array([day] * len(ids)),
            "x": pa.array([float(i) / 7 for i in ids]),
            "y": pa.array([float(i % 3) for i in ids]),
        }
    )


@pytest.fixture(params=["sqlite", "served"])
def history(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """v0: ids 0..39 (day a); v1: +40..79 (day b); v2: +80..89 (day a); v3: delete id < 10; v4: dal optimize
    (day a's files compacted: no data change); v5: replace day b by ids 100..119. On a SQLite catalog, and once
    more through a ``dal serve`` catalog (the same results)."""
    url = f"sqlite:///{tmp_path}/catalog.db" if request.param == "sqlite" else request.getfixturevalue("served_url")
    path = str(tmp_path / "events")
    dal.write(_batch(range(40), "a"), "ev.t", path=path, partition_by=["day"], catalog=url)
    dal.write(_batch(range(40, 80), "b"), "ev.t", catalog=url)
    dal.write(_batch(range(80, 90), "a"), "ev.t", catalog=url)
    dal.delete("ev.t", where="id < 10", catalog=url)
    assert dal.lifecycle.optimize("ev.t", catalog=url).version == 4
    dal.write(_batch(range(100, 120), "b"), "ev.t", mode="overwrite", where="day = 'b'", catalog=url)
    return url, path, "ev.t"


def _ids(table: pa.Table, kind: str | None = None) -> Counter[int]:
    rows = table.to_pylist()
    return Counter(r["id"] for r in rows if kind is None or r["_change_type"] == kind)


def _storage(url: str, name: str, number: int) -> int:
    return int(dal.get_catalog(url).version(name, number).storage_version)


def test_each_versions_changes_are_the_set_difference_of_delta_rs_reads(history: tuple[str, str, str]) -> None:
    url, path, name = history
    newest = dal.open(name, catalog=url).number
    for v in range(1, newest + 1):
        got = dal.open(name, v, catalog=url).changes(since=v - 1).to_arrow()
        before = {r["id"] for r in delta_rs_read(path, _storage(url, name, v - 1)).to_pylist()}
        after = {r["id"] for r in delta_rs_read(path, _storage(url, name, v)).to_pylist()}
        assert _ids(got, "insert") == Counter(after - before), v
        assert _ids(got, "delete") == Counter(before - after), v
        assert set(got.column("_commit_version").to_pylist()) <= {v}
    assert dal.open(name, 4, catalog=url).changes(since=3).count() == 0  # optimize changes no data


def test_a_range_and_since_none(history: tuple[str, str, str]) -> None:
    url, _path, name = history
    ds = dal.open(name, 3, catalog=url)
    got = ds.changes(since=0).to_arrow()
    assert _ids(got, "insert") == Counter(range(40, 90)) and _ids(got, "delete") == Counter(range(10))
    assert got.column_names == ["id", "day", "x", "y", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(set(got.column("_commit_version").to_pylist())) == [1, 2, 3]
    everything = ds.changes(since=None).to_arrow()  # from the first version: its rows are inserts too
    assert _ids(everything, "insert") == Counter(range(90))
    assert ds.changes(since=dal.open(name, 0, catalog=url)).count() == got.num_rows  # a Dataset as since


def test_select_filter_window_free_terminals(history: tuple[str, str, str]) -> None:
    url, _path, name = history
    scan = dal.open(name, catalog=url).changes(since=4)
    inserts = scan.filter("_change_type = 'insert'").select("id", "_commit_version")
    table = inserts.to_arrow()
    assert table.column_names == ["id", "_commit_version"]
    assert Counter(table.column("id").to_pylist()) == Counter(range(100, 120))
    assert inserts.count() == 20 and len(inserts.to_pandas()) == 20
    deletes = scan.filter(dal.col("_change_type") == "delete").filter("id >= 40")
    assert Counter(deletes.to_arrow().column("id").to_pylist()) == Counter(range(40, 80))
    with pytest.raises(FilterError, match="unknown column"):
        scan.filter("nope = 1")


def test_shards_are_disjoint_and_cover_and_a_shuffle_is_a_permutation(history: tuple[str, str, str]) -> None:
    url, _path, name = history
    scan = dal.open(name, catalog=url).changes(since=0)
    whole = Counter(scan.to_arrow().column("id").to_pylist())
    parts = [Counter(scan.shard(r, 3, remainder="keep").to_arrow().column("id").to_pylist()) for r in range(3)]
    assert sum(parts, Counter()) == whole
    shuffled = scan.shuffle(seed=5, buffer_size=4)
    one, two = shuffled.to_arrow().column("id").to_pylist(), shuffled.to_arrow().column("id").to_pylist()
    assert one == two and Counter(one) == whole  # deterministic, the same rows
    assert shuffled.set_epoch(1).to_arrow().column("id").to_pylist() != one or len(one) < 3


def test_to_torch_workers_and_resume_mid_version(history: tuple[str, str, str]) -> None:
    torch = pytest.importorskip("torch")
    url, _path, name = history
    scan = dal.open(name, catalog=url).changes(since=0).select("id", "x").shuffle(seed=1)
    data = scan.to_torch(8)
    batches = [b["id"].tolist() for b in data]
    flat = [i for b in batches for i in b]
    assert Counter(flat) == Counter(scan.to_arrow().column("id").to_pylist())
    it = iter(data)
    head = [next(it)["id"].tolist() for _ in range(3)]
    state = data.state_dict()
    again = scan.to_torch(8)
    again.load_state_dict(state)
    rest = [i for b in again for i in b["id"].tolist()]
    assert [i for b in head for i in b] + rest == flat
    loader = torch.utils.data.DataLoader(scan.to_torch(8), batch_size=None, num_workers=2)
    assert Counter(i for b in loader for i in b["id"].tolist()) == Counter(flat)
    other = dal.open(name, catalog=url).changes(since=2).select("id", "x").shuffle(seed=1).to_torch(8)
    with pytest.raises(DalError):
        other.load_state_dict(state)  # a state of another change range is refused


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_dataloader_workers_started_by_spawn_and_forkserver(history: tuple[str, str, str], method: str) -> None:
    """Workers that do not inherit the parent's memory get the change rows pickled with the source (read once,
    in this process, by ``plan()``): every row once, by id, as ``to_arrow`` and as the two workers split it."""
    torch = pytest.importorskip("torch")
    url, path, name = history
    scan = dal.open(name, catalog=url).changes(since=0).select("id", "_change_type").shuffle(seed=3)
    expected = Counter((r["id"], r["_change_type"]) for r in scan.to_arrow().to_pylist())
    # independently: version 0 against the newest as delta-rs reads them (set difference by id, both ways)
    before = set(delta_rs_read(path, _storage(url, name, 0)).column("id").to_pylist())
    after = set(delta_rs_read(path, _storage(url, name, 5)).column("id").to_pylist())
    net = Counter({(i, "insert"): 1 for i in after - before}) + Counter({(i, "delete"): 1 for i in before - after})
    assert (
        Counter({k: 1 for k in expected if k[1] == "insert" and (k[0], "delete") not in expected})
        + Counter({k: 1 for k in expected if k[1] == "delete" and (k[0], "insert") not in expected})
        == net
    )
    loader = torch.utils.data.DataLoader(
        scan.to_torch(8), batch_size=None, num_workers=2, multiprocessing_context=method, timeout=120
    )
    got = Counter((i, t) for b in loader for i, t in zip(b["id"].tolist(), b["_change_type"], strict=True))
    assert got == expected


def test_refusals(history: tuple[str, str, str]) -> None:
    url, _path, name = history
    ds = dal.open(name, 1, catalog=url)
    scan = ds.changes(since=0)
    for call in (lambda: scan.rows(), lambda: scan.to_torch_map(), lambda: scan.bytes_planned()):
        with pytest.raises(FilterError, match="change read"):
            call()
    with pytest.raises(FilterError, match="change read"):
        scan.sample(0.5)
    with pytest.raises(DalError):
        ds.changes(since=3)  # after this version (1)
    with pytest.raises(DalError):
        ds.changes(since=-1)


def test_the_cli_prints_what_changed(history: tuple[str, str, str]) -> None:
    from click.testing import CliRunner

    from dal.cli.app import cli

    url, _path, name = history
    r = CliRunner().invoke(cli, ["--catalog", url, "changes", name, "--since", "4", "-n", "100", "--json"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)
    assert body["since"] == 4 and body["version"] == 5 and body["total"] == 60
    assert Counter(row["_change_type"] for row in body["rows"]) == {"delete": 40, "insert": 20}
    r = CliRunner().invoke(cli, ["--catalog", url, "changes", name, "--since", "4", "--where", "_change_type = 'insert'",
                                 "--columns", "id,_change_type", "-o", "tsv"])  # fmt: skip
    lines = r.stdout.splitlines()
    assert r.exit_code == 0 and lines[0] == "id\t_change_type" and len(lines) == 11  # header + 10 rows
    r = CliRunner().invoke(cli, ["--catalog", url, "changes", name, "--since", "9"])
    assert r.exit_code == 1 and "since is after this version" in r.stderr


@pytest.mark.slow
def test_continual_training_example_trains_every_insert_exactly_once_across_a_kill(tmp_path: Path) -> None:
    """examples/continual_training.py: 5 appends while the loop trains, one SIGKILL in the middle of a version:
    every inserted row is trained on exactly once (the ids the checkpoint says the model saw)."""
    url = f"sqlite:///{tmp_path}/catalog.db"
    env = {**os.environ, "DAL_CATALOG_URL": url, "DAL_HOME": str(tmp_path / "home")}
    ckpt = tmp_path / "ckpt.json"
    cmd = [sys.executable, str(REPO / "examples" / "continual_training.py"), "ct.events", "--checkpoint", str(ckpt),
           "--once", "--record-ids", "--batch-size", "8"]  # fmt: skip

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cmd, *extra], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    def append(ids: range) -> None:
        dal.write(_batch(ids, "a"), "ct.events", path=str(tmp_path / "ct"), catalog=url)

    append(range(0, 50))
    killed = run("--kill-after", "3")  # killed after its third step, before that step's checkpoint
    assert killed.returncode == -9, killed.stderr
    state = json.loads(ckpt.read_text())
    assert state["current"] == 0 and len(state["ids"]) == 16  # two steps checkpointed
    append(range(50, 70))  # two appends land while it is down
    append(range(70, 75))
    first = run()
    assert first.returncode == 0, first.stderr
    for i in range(3):  # three more, each trained as it lands
        append(range(100 + 10 * i, 110 + 10 * i))
        assert run().returncode == 0
    assert run().returncode == 0  # caught up: nothing more
    trained = json.loads(ckpt.read_text())["ids"]
    assert Counter(trained) == Counter([*range(75), *range(100, 130)])  # each once
