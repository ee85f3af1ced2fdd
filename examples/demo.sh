#!/usr/bin/env bash
# make demo: a Spark job registers a Delta dataset in several versions, then the CLI browses the catalog.
# Uses the embedded default catalog (dal db status prints where it lives) unless DAL_CATALOG_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
dal db status
python examples/spark_register.py --days 3
bash examples/browse.sh
