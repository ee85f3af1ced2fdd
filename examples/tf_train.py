"""Keras model.fit on one pinned version through dal's tf.data adapter.

python examples/tf_train.py                      # the dataset examples/spark_register.py builds
python examples/tf_train.py --version prod --epochs 3
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

import dal

FEATURES = ["temp_mean_1h", "humidity_max_1h", "temperature", "humidity"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", default="weather.sensor_features")
    parser.add_argument("--version", default=None)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    ds = dal.open(args.dataset, args.version)
    data = ds.select(*FEATURES, "label").shuffle(seed=3).to_tf(batch_size=64)
    print("element_spec:", {k: (v.shape.as_list(), v.dtype.name) for k, v in data.element_spec.items()})

    def to_xy(d: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
        x = tf.stack([tf.cast(d[f], tf.float32) for f in FEATURES], axis=1) / 100.0
        return x, tf.cast(d["label"], tf.float32)

    model = tf.keras.Sequential(
        [
            tf.keras.Input((len(FEATURES),)),
            tf.keras.layers.Dense(16, activation="relu"),
            tf.keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="binary_crossentropy", metrics=["accuracy"])
    history = model.fit(data.map(to_xy), epochs=args.epochs, verbose=2)
    print(f"trained on version {ds.number} of {ds.name}: final loss {history.history['loss'][-1]:.4f}")


if __name__ == "__main__":
    main()
