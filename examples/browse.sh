#!/usr/bin/env bash
# A tour of the dal CLI over the dataset examples/spark_register.py registers.
set -euo pipefail
NAME=weather.sensor_features
LATEST=$(dal versions "$NAME" --json | python -c 'import json,sys; print(json.load(sys.stdin)[-1]["version"])')

echo "== dal ls";                     dal ls
echo "== dal show $NAME";             dal show "$NAME"
echo "== dal versions $NAME";         dal versions "$NAME"
echo "== dal schema $NAME";           dal schema "$NAME"
echo "== dal partitions $NAME";       dal partitions "$NAME"
echo "== dal tag $NAME $LATEST demo-prod --force"
dal tag "$NAME" "$LATEST" demo-prod --force
echo "== dal diff $NAME 0 demo-prod"; dal diff "$NAME" 0 demo-prod
echo "== dal schema $NAME --version demo-prod --json (first field)"
dal schema "$NAME" --version demo-prod --json | python -c 'import json,sys; print(json.load(sys.stdin)["fields"][0])'
echo "== dal schema weather.radar_frames (tensor fields of a Petastorm dataset)"
dal schema weather.radar_frames
echo "== a mistake prints one line:"
dal show weather.sensor_featurez || true
