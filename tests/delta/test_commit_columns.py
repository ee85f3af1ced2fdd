"""A commit's add actions read as columns (``dal.formats.delta.commit_adds``, ``Tally.apply_lines``): register and
sync describe every version exactly as the per-action path does, and any action that is not plainly one the
columns take (a count that is not a non-negative integer, a value of another JSON type, an extra key, ...)
takes the per-action path, which decides as before (the same result or the same error)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dal.errors import FormatError
from dal.formats.delta import commit_adds, replay
from dal.formats.delta.format import DeltaFormat

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in (("id", "long"), ("part", "integer"))
    ],
}


@pytest.fixture(autouse=True)
def _columns_from_one_add(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit with an add read as columns (by default only commits of ``COLUMNS_FROM`` adds or more)."""
    monkeypatch.setattr(commit_adds, "COLUMNS_FROM", 1)


def _add(path: str, part: object = "1", size: int | None = None, stats: object = '{"numRecords": 10}',
         **extra: Any) -> dict[str, Any]:  # fmt: skip
    add: dict[str, Any] = {"path": path, "partitionValues": {"part": part}, "size": size, "modificationTime": 1,
                           "dataChange": True, **extra}  # fmt: skip
    if stats is not None:
        add["stats"] = stats
    return {"add": add}


class Log:
    """A Delta table written by hand: 10-row Parquet files and commit files of the given actions."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.template = root / "_template.parquet"
        pq.write_table(pa.table({"id": pa.array(range(10), pa.int64())}), self.template)
        self.size = self.template.stat().st_size
        self.version = -1

    def file(self, rel: str) -> str:
        dest = self.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.template, dest)
        return rel

    def commit(self, *actions: dict[str, Any], raw: list[str] = ()) -> int:  # type: ignore[assignment]
        self.version += 1
        lines = [json.dumps({"commitInfo": {"timestamp": 1_700_000_000_000 + self.version, "operation": "WRITE"}})]
        if self.version == 0:
            lines.append(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}))
            meta = {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(SCHEMA),
                    "partitionColumns": ["part"], "configuration": {}, "createdTime": 1}  # fmt: skip
            lines.append(json.dumps({"metaData": meta}))
        for a in actions:
            if "add" in a and a["add"].get("size") is None:
                a["add"]["size"] = self.size
            lines.append(json.dumps(a))
        lines += raw
        (self.root / "_delta_log").mkdir(exist_ok=True)
        (self.root / "_delta_log" / f"{self.version:020d}.json").write_text("\n".join(lines) + "\n")
        return self.version


def _drafts(root: Path) -> list[dict[str, Any]]:
    drafts = DeltaFormat().snapshots(str(root), {}, after=None, previous=None)
    return [
        {"v": d.storage_version, "rows": d.row_count, "files": d.file_count, "bytes": d.size_bytes,
         "parts": d.partitions, "op": d.operation, "props": dict(d.properties)}
        for d in drafts
    ]  # fmt: skip


def _both(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict[str, Any]], dict[int, bool]]:
    """The drafts with commits read as columns (and which versions were), then the same with every commit
    taking the per-action path: asserted equal."""
    taken: dict[int, bool] = {}
    real = replay.Tally.apply_lines

    def recorded(self: replay.Tally, version: int, lines: Any, budget: replay.Budget) -> bool:
        taken[version] = real(self, version, lines, budget)
        return taken[version]

    with monkeypatch.context() as m:
        m.setattr(replay.Tally, "apply_lines", recorded)
        columns = _drafts(root)
    with monkeypatch.context() as m:
        m.setattr(replay.Tally, "apply_lines", lambda self, version, lines, budget: False)
        per_action = _drafts(root)
    assert columns == per_action
    return columns, taken


def test_columns_describe_what_the_per_action_path_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log(tmp_path / "t")
    log.commit(*(_add(log.file(f"part={p}/f{p}.parquet"), str(p)) for p in range(3)),
               _add(log.file("part=__HIVE_DEFAULT_PARTITION__/n.parquet"), None))  # fmt: skip
    # no statistics, no count in them, a count only nested (not the file's): each counted from its footer
    log.commit(
        _add(log.file("part=1/nostats.parquet"), stats=None),
        _add(log.file("part=1/empty.parquet"), stats="{}"),
        _add(log.file("part=2/nested.parquet"), "2", stats='{"minValues": {"numRecords": 99}, "nullCount": {}}'),
        _add("part=1/a%20b.parquet", stats='{"numRecords": 10, "maxValues": {"id": 9}}'),
    )
    log.file("part=1/a b.parquet")
    log.commit(_add("part=0/f0.parquet", "0", dataChange=False))  # a re-add replaces the file
    log.commit({"remove": {"path": "part=1/f1.parquet", "dataChange": True}}, _add(log.file("part=1/g.parquet")))
    log.commit(_add(log.file("part=2/twice.parquet"), "2"), _add("part=2/twice.parquet", "2"))
    log.commit(_add("part=0/gone.parquet", "0"))  # never written: the version is unavailable
    columns, taken = _both(log.root, monkeypatch)
    assert taken == {0: False, 1: True, 2: True, 3: True, 4: True, 5: True}  # 0: delta-rs loads the first
    assert [d["rows"] for d in columns] == [40, 80, 80, 80, 90, 100]
    assert [d["files"] for d in columns] == [4, 8, 8, 8, 9, 10]
    assert replay.UNAVAILABLE_KEY in columns[5]["props"] and replay.UNAVAILABLE_KEY not in columns[4]["props"]


@pytest.mark.parametrize(
    "line",
    [
        json.dumps(_add("part=1/x.parquet", stats='{"numRecords": 10.0}')),  # a float
        json.dumps(_add("part=1/x.parquet", stats='{"numRecords": true}')),
        json.dumps(_add("part=1/x.parquet", stats='{"numRecords": -1}')),
        json.dumps(_add("part=1/x.parquet", stats='{"numRecords": 10, "numRecords": 3}')),  # a duplicate key
        json.dumps(_add("part=1/x.parquet", stats='{"numRecords":\n10}')),  # two lines
        json.dumps(_add("part=1/x.parquet", stats=" ")),  # blank
        json.dumps(_add("part=1/x.parquet", stats='{"numRecords": 10} {"numRecords": 3}')),  # two objects
        json.dumps(_add("part=1/x.parquet", stats="[10]")),
        json.dumps(_add("part=1/x.parquet", stats={"numRecords": 10})),  # not text
        json.dumps(_add("part=1/x.parquet", part=1)),  # a partition value that is a number
        json.dumps({"add": {**_add("part=1/x.parquet")["add"], "partitionValues": {"part": "1", "other": "2"}}}),
        json.dumps({"add": {**_add("part=1/x.parquet")["add"], "partitionValues": None}}),
        json.dumps({**_add("part=1/x.parquet"), "txn": {"appId": "a", "version": 1}}),  # two actions on a line
        json.dumps({"add": None}),
        json.dumps(_add("part=1/x.parquet", size=1.5)),  # type: ignore[arg-type]
        '{"add": {"path": "part=1/x.parquet", "path": "part=1/y.parquet", "size": 10}}',
    ],
)
def test_what_the_columns_do_not_plainly_take_is_left_to_the_per_action_path(line: str) -> None:
    assert commit_adds.read_adds([line.encode()], ["part"], "/tmp/t", "t") is None
    plain = json.dumps(_add("part=1/y.parquet", size=10_000)).encode()
    assert commit_adds.read_adds([plain], ["part"], "/tmp/t", "t") is not None


def test_a_two_line_text_beside_a_blank_one_is_not_read_as_columns() -> None:
    """Two statistics texts whose lines add up (one of two lines, one blank) would shift every count after
    them by one row if read as one object per line: the per-action path takes them."""
    lines = [json.dumps(_add("part=1/x.parquet", size=10_000, stats='{"numRecords": 10}\n{"numRecords": 3}')).encode(),
             json.dumps(_add("part=1/y.parquet", size=10_000, stats=" ")).encode(),
             json.dumps(_add("part=1/z.parquet", size=10_000, stats='{"numRecords": 7}')).encode()]  # fmt: skip
    assert commit_adds.read_adds(lines, ["part"], "/tmp/t", "t") is None
    assert commit_adds.read_adds(lines[2:], ["part"], "/tmp/t", "t") is not None


def test_a_commit_the_columns_leave_is_applied_or_loaded_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log(tmp_path / "t")
    log.commit(_add(log.file("part=1/a.parquet")))
    log.commit(_add(log.file("part=1/c.parquet"), part=1))  # a number: applied one action at a time
    log.commit(_add(log.file("part=1/d.parquet")), raw=[' {"add": {"path": "part=1/e.parquet", "size": 1}}'])
    columns, taken = _both(log.root, monkeypatch)
    assert taken == {0: False, 1: False, 2: False}
    assert [d["rows"] for d in columns] == [10, 20, 30]


@pytest.mark.parametrize(
    ("add", "message"),
    [
        (_add("../outside.parquet"), "an add action's path names '../outside.parquet'"),
        (_add("/etc/passwd"), "an add action's path names '/etc/passwd'"),
        (_add("s3://elsewhere/x.parquet"), "an add action's path names 's3://elsewhere/x.parquet'"),
        (
            _add("part=1/big.parquet", stats='{"numRecords": 100000000000000}'),
            "holds 100000000000000 rows (numRecords) but its Parquet footer says 10",
        ),
        (_add("part=1/big.parquet", stats='{"numRecords": 7}'), "holds 7 rows (numRecords) but its Parquet footer"),
    ],
)
def test_a_refused_add_is_refused_with_the_same_error(tmp_path: Path, add: dict[str, Any], message: str) -> None:
    log = Log(tmp_path / "t")
    log.commit(_add(log.file("part=1/a.parquet")))
    log.file("part=1/big.parquet")
    log.commit(_add(log.file("part=1/b.parquet")), add)
    with pytest.raises(FormatError, match="Delta version 1") as e:
        _drafts(log.root)
    assert message in str(e.value)


def test_a_small_commit_is_applied_one_action_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_adds, "COLUMNS_FROM", 100)  # the default
    log = Log(tmp_path / "t")
    log.commit(_add(log.file("part=1/a.parquet")))
    log.commit(*(_add(log.file(f"part=1/s{i}.parquet")) for i in range(99)))
    log.commit(*(_add(log.file(f"part=1/b{i}.parquet")) for i in range(100)))
    columns, taken = _both(log.root, monkeypatch)
    assert taken == {0: False, 1: False, 2: True}
    assert [d["rows"] for d in columns] == [10, 1000, 2000]
