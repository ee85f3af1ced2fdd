"""PyTorch: a scan as a ``torch.utils.data.IterableDataset`` that splits rows between ranks AND workers.

    ds = dal.open("weather.radar", "prod")
    data = ds.shuffle(seed=1).to_torch(batch_size=256)      # rank from torch.distributed when initialised
    loader = DataLoader(data, batch_size=None, num_workers=2, pin_memory=True)
    for epoch in range(3):
        data.set_epoch(epoch)
        for batch in loader: ...                             # dict: column -> tensor (or list of str)

Every rank reads the same number of rows (``Scan.shard``'s default ``remainder="pad"``) and, because
each rank's share is split between its workers by the same arithmetic, yields the same number of batches,
so collective steps never wait on a rank that ran out. Rows never repeat across workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.errors import DalError, check_int, require

if TYPE_CHECKING:
    from dal.scan import Scan

_torch = require("torch", "torch")
_data = require("torch.utils.data", "torch")

Transform = Callable[[pa.RecordBatch], "pa.RecordBatch | Any"]


class TorchDataset(_data.IterableDataset):  # type: ignore[misc,name-defined]
    """Batches of one pinned version as dicts of tensors; see the module docstring.

    Args:
        scan: what to read (projection, filters, window, shuffle; a ``shard`` if ranks are not taken
            from torch.distributed).
        batch_size: rows per batch (the last batch of a worker may be shorter).
        transform: a function over each Arrow batch returning an Arrow batch or a pandas DataFrame,
            like Petastorm's TransformSpec. Declare what it returns in ``output_schema``.
        output_schema: the columns and Arrow types ``transform`` returns (checked on every batch).
    """

    def __init__(
        self,
        scan: Scan,
        batch_size: int = 256,
        *,
        transform: Transform | None = None,
        output_schema: pa.Schema | None = None,
    ) -> None:
        super().__init__()
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=2**31 - 1)
        if transform is not None and output_schema is None:
            raise DalError("a transform must declare its output_schema (the columns and types it returns)")
        # resolve the version's files, schema and row groups here, in the main process: delta-rs (tokio)
        # panics in forked DataLoader workers (tokio-rs/tokio#4301); workers then only touch pyarrow
        scan.plan()
        self.scan = scan
        self.batch_size = batch_size
        self.transform = transform
        self.output_schema = output_schema
        self.epoch = scan.epoch

    def set_epoch(self, epoch: int) -> None:
        """Use another epoch's order (call before each epoch when shuffling, as with DistributedSampler)."""
        self.epoch = int(epoch)

    def rank_scan(self) -> Scan:
        """The scan for this process: its shard from ``.shard`` or from torch.distributed, at this epoch."""
        scan = self.scan
        dist = _torch.distributed
        if scan.shard_ is None and dist.is_available() and dist.is_initialized():
            scan = scan.shard(dist.get_rank(), dist.get_world_size())
        return scan.set_epoch(self.epoch)

    def num_batches(self, num_workers: int = 0) -> int:
        """Batches this rank yields per epoch with ``num_workers`` DataLoader workers."""
        scan = self.rank_scan()
        parts = max(num_workers, 1)
        total = 0
        for w in range(parts):
            rows = sum(scan.task_rows(scan.split(w, parts)))  # counted (filter columns only), not read
            total += -(-rows // self.batch_size)
        return total

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = _data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        scan = self.rank_scan()
        tasks = scan.split(worker, workers) if workers > 1 else scan.plan()
        for batch in scan.iter_batches(self.batch_size, tasks=tasks, stream=worker):
            yield self._convert(batch)

    def _convert(self, batch: pa.RecordBatch) -> dict[str, Any]:
        table = pa.Table.from_batches([batch])
        if self.transform is not None:
            out = self.transform(batch)
            if not isinstance(out, pa.RecordBatch | pa.Table):
                out = pa.Table.from_pandas(out, preserve_index=False)
            table = pa.table(out) if isinstance(out, pa.RecordBatch) else out
            assert self.output_schema is not None
            if table.schema.names != self.output_schema.names or not all(
                a.type.equals(b.type) for a, b in zip(table.schema, self.output_schema, strict=True)
            ):
                raise DalError(f"transform returned {table.schema} but declared output_schema {self.output_schema}")
            return {n: _tensor(table.column(n).to_numpy(zero_copy_only=False)) for n in table.column_names}
        decoded = self.scan.dataset._decode(table)
        return {name: _tensor(values) for name, values in decoded.items()}


def _tensor(values: Any) -> Any:
    """NumPy -> tensor (copying read-only Arrow memory); strings stay lists; ragged tensors become lists."""
    if isinstance(values, list):
        return [None if v is None else _tensor(v) for v in values]
    if not isinstance(values, np.ndarray):
        return values
    if values.dtype.kind in "OUS":
        return values.tolist()
    if values.dtype.kind == "M":
        values = values.astype("datetime64[us]").astype(np.int64)  # timestamps as microseconds since epoch
    if not values.flags.writeable or not values.flags.c_contiguous:
        values = np.array(values, copy=True, order="C")
    return _torch.from_numpy(values)
