"""The training terminals (``to_torch``, ``to_tf``) of a ``Scan``, a ``Dataset`` and a ``Mix``, defined once.

Each of the three hands its read source (``dal.read.source``: a frozen value the adapters read) to the adapter;
the adapters are imported inside the call, so importing ``dal`` loads no framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal.read.transform import TransformSpec  # at run time: typing.get_type_hints resolves the signatures

if TYPE_CHECKING:
    import tensorflow as tf

    from dal.adapters.torch import TorchDataset
    from dal.read.source import Source

__all__ = ["Feeds"]


class Feeds:
    """The training terminals of a ``Scan``, a ``Dataset`` and a ``Mix``, defined once: each hands its read
    source (``dal.read.source``) to the adapter."""

    def _feed(self) -> Source:
        raise NotImplementedError

    def to_torch(
        self,
        batch_size: int = 256,
        *,
        transform: TransformSpec | Callable[[pa.RecordBatch], Any] | None = None,
        output_schema: pa.Schema | None = None,
        num_canonical_shards: int | None = None,
        device: str | None = None,
    ) -> TorchDataset:
        """A ``torch.utils.data.IterableDataset`` of dicts of tensors (see ``dal.adapters.torch``).

        Args:
            batch_size: Rows per batch (the last of an epoch may be shorter).
            transform: A ``dal.TransformSpec``, or a function over each chunk declared in ``output_schema``.
            output_schema: The columns and Arrow types a plain-function ``transform`` returns.
            num_canonical_shards: Elastic order: a multiple of every world size to run at.
            device: ``"cuda"`` copies each batch through pinned memory; ``"cpu"``/None leaves it in host memory.
        """
        source = self._feed()
        source.log_read()  # here, in the calling process (DataLoader workers plan in theirs)
        from dal.adapters.torch import TorchDataset

        return TorchDataset(
            source, batch_size, transform=transform, output_schema=output_schema,
            num_canonical_shards=num_canonical_shards, device=device,
        )  # fmt: skip

    def to_tf(
        self,
        batch_size: int = 256,
        *,
        prefetch: int | None = None,
        transform: TransformSpec | Callable[[pa.RecordBatch], Any] | None = None,
        output_schema: pa.Schema | None = None,
    ) -> tf.data.Dataset:
        """A prefetching ``tf.data.Dataset`` of dicts with a full element_spec (see ``dal.adapters.tf``).

        Args:
            batch_size: Rows per batch.
            prefetch: Batches tf.data prefetches (default: AUTOTUNE).
            transform: As ``to_torch``'s; the element_spec comes from the fields it declares.
            output_schema: The columns and Arrow types a plain-function ``transform`` returns.
        """
        source = self._feed()
        source.log_read()
        from dal.adapters.tf import to_tf

        return to_tf(source, batch_size, prefetch=prefetch, transform=transform, output_schema=output_schema)
