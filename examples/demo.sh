#!/usr/bin/env bash
# make demo: a Spark job registers datasets in several versions, torch DDP trains on one pinned version
# (2 ranks, gloo, CPU), then the CLI browses the catalog.
# Uses the embedded default catalog (dal db status prints where it lives) unless DAL_CATALOG_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
dal db status
python examples/spark_register.py --days 3
python -m torch.distributed.run --standalone --nproc_per_node=2 examples/torch_ddp_train.py
bash examples/browse.sh
