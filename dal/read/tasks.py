"""ReadTask: the picklable unit of reading — one row group of one file, optionally a slice of its rows."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ReadTask:
    """Rows of one row group. ``offset``/``length`` count rows that pass the scan's filter (for sharding)."""

    uri: str
    row_group: int
    partition_values: tuple[tuple[str, str | None], ...]
    num_rows: int  # rows in the row group, before filtering
    offset: int = 0
    length: int | None = None  # None: every (matching) row from offset on
    deleted: tuple[int, ...] = ()  # positions in the row group a deletion vector removes (sorted)
    exact: bool = False  # read through fragments.read_exact (deletion vectors, column mapping)

    @property
    def live_rows(self) -> int:
        """Rows of the row group a reader sees, before filtering (deleted rows removed)."""
        return self.num_rows - len(self.deleted)

    def slice(self, offset: int, length: int) -> ReadTask:
        return replace(self, offset=self.offset + offset, length=length)
