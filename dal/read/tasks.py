"""ReadTask: the picklable unit of reading — one row group of one file, optionally a slice of its rows.

A *file task* (``row_group == WHOLE_FILE``) stands for every row group of one file before its footer is read:
planning without a filter makes one per file from the row count the log records (``Query.file_tasks``), shards
cut them by rows, and ``Query.expand`` turns them into row-group tasks when the file is about to be read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

WHOLE_FILE = -1  # the row group of a file task: the whole file, its row groups not yet known


@dataclass(frozen=True)
class ReadTask:
    """Rows of one row group. ``offset``/``length`` count rows that pass the scan's filter (for sharding)."""

    uri: str
    row_group: int  # WHOLE_FILE: a file task (``deleted`` then counts positions in the file)
    partition_values: tuple[tuple[str, str | None], ...]
    num_rows: int  # rows in the row group (a file task: in the file), before filtering
    offset: int = 0
    length: int | None = None  # None: every (matching) row from offset on
    deleted: tuple[int, ...] = ()  # positions in the row group a deletion vector removes (sorted)
    exact: bool = False  # read through fragments.read_exact (deletion vectors, column mapping)

    @property
    def live_rows(self) -> int:
        """Rows of the row group a reader sees, before filtering (deleted rows removed)."""
        return self.num_rows - len(self.deleted)

    @property
    def whole_file(self) -> bool:
        """Whether this is a file task (its row groups resolved when the file is opened)."""
        return self.row_group == WHOLE_FILE

    def slice(self, offset: int, length: int) -> ReadTask:
        return replace(self, offset=self.offset + offset, length=length)
