"""Continual training: train on each new version's inserted rows as it lands, exactly once, across kills.

python examples/continual_training.py weather.events --checkpoint /tmp/ckpt.json --once
python examples/continual_training.py weather.events --checkpoint /tmp/ckpt.json --poll 60   # forever

The checkpoint is one JSON file, replaced atomically after every step: the model's weights, the last
version fully trained on (``last``), the version being trained on (``current``) and the feed's position in
it (``to_torch``'s ``state_dict``). After a kill the next run loads it and goes on exactly where the
checkpoint stands: the rows of the interrupted version not yet trained on, then every version that landed
meanwhile, read as one change read ``dal.open(name, newest).changes(since=last)``.

Decided here: the loop trains on inserts (``_change_type = 'insert'``); a delete cannot be un-trained.
``--record-ids`` keeps the trained ``id`` values in the checkpoint (what tests/changes checks).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch

import dal


def load(path: Path, features: int) -> dict[str, Any]:
    if path.exists():
        return dict(json.loads(path.read_text()))
    return {"last": None, "current": None, "feed": None, "weights": [0.0] * (features + 1), "ids": []}


def save(path: Path, ckpt: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ckpt))
    os.replace(tmp, path)  # atomic: a kill leaves the old checkpoint or the new one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--features", nargs="+", default=["x"])
    parser.add_argument("--label", default="y")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--once", action="store_true", help="stop when caught up with the newest version")
    parser.add_argument("--poll", type=float, default=30.0, help="seconds between looks for a new version")
    parser.add_argument("--record-ids", action="store_true")
    parser.add_argument("--kill-after", type=int, default=None, help="SIGKILL itself after N steps (tests)")
    args = parser.parse_args()

    ckpt = load(args.checkpoint, len(args.features))
    weights = torch.tensor(ckpt["weights"], requires_grad=True)
    opt = torch.optim.SGD([weights], lr=0.01)
    steps = 0
    while True:
        newest = dal.open(args.dataset).number
        target = ckpt["current"] if ckpt["current"] is not None else newest
        if ckpt["last"] is not None and target <= ckpt["last"]:  # nothing new
            if args.once:
                return
            time.sleep(args.poll)
            continue
        columns = [*args.features, args.label, *(["id"] if args.record_ids else [])]
        scan = dal.open(args.dataset, target).changes(since=ckpt["last"]).filter("_change_type = 'insert'")
        data = scan.select(*columns).to_torch(args.batch_size)
        if ckpt["current"] == target and ckpt["feed"] is not None:
            data.load_state_dict(ckpt["feed"])  # the interrupted version: its rows not yet trained on
        ckpt["current"] = target
        for batch in data:
            x = torch.stack([batch[f].float() for f in args.features], dim=1)
            pred = x @ weights[:-1] + weights[-1]
            loss = torch.nn.functional.mse_loss(pred, batch[args.label].float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if args.kill_after is not None and steps >= args.kill_after:
                os.kill(os.getpid(), signal.SIGKILL)  # after the step, before its checkpoint: redone on restart
            ckpt["weights"], ckpt["feed"] = weights.detach().tolist(), data.state_dict()
            if args.record_ids:
                ckpt["ids"] += batch["id"].tolist()
            save(args.checkpoint, ckpt)
        ckpt["last"], ckpt["current"], ckpt["feed"] = target, None, None
        save(args.checkpoint, ckpt)
        print(f"trained on the inserts up to version {target}")


if __name__ == "__main__":
    main()
