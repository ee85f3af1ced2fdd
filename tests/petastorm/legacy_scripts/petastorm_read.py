"""Runs in the legacy venv: petastorm's make_reader and make_batch_reader read a dal-written dataset and
save every value they decoded, keyed by reader, field and id."""

import sys

import numpy as np
from petastorm import make_batch_reader, make_reader

url, out_path = sys.argv[1], sys.argv[2]
got = {}
with make_reader(url, reader_pool_type="dummy", num_epochs=1) as reader:
    n = 0
    for row in reader:
        n += 1
        for k, v in row._asdict().items():
            got[f"row/{k}/{row.id}"] = np.asarray(v)
print("MAKE_READER", n)
with make_batch_reader(url, reader_pool_type="dummy", num_epochs=1) as reader:
    # make_batch_reader hands codec fields back encoded (it decodes codecs only in make_reader):
    # decode them with petastorm's own codecs from the schema it read
    fields = reader.schema.fields
    n = 0
    for batch in reader:
        d = batch._asdict()
        for i, ident in enumerate(d["id"]):
            n += 1
            for k, col in d.items():
                value = col[i]
                codec = fields[k].codec if k in fields else None
                if (
                    isinstance(value, (bytes, bytearray))
                    and codec is not None
                    and type(codec).__name__ != "ScalarCodec"
                ):
                    value = codec.decode(fields[k], value)
                got[f"batch/{k}/{ident}"] = np.asarray(value)
print("MAKE_BATCH_READER", n)
np.savez(out_path, **got)
