"""Runs in the legacy venv: petastorm's make_reader reads each dataset given; every decoded value goes to
JSON (see values_json), or the error petastorm raised when it cannot open the dataset at all.

usage: petastorm_read_json.py OUT_JSON URL...
"""

import json
import sys

from values_json import read_all

out_path, urls = sys.argv[1], sys.argv[2:]
result = {}
for url in urls:
    try:
        rows, failed = read_all(url)
        result[url] = {"rows": rows, "failed_fields": failed}
    except Exception as e:  # what a petastorm user gets on this dataset
        result[url] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
with open(out_path, "w") as f:
    json.dump(result, f)
print("READ", sum(len(r.get("rows", ())) for r in result.values()))
