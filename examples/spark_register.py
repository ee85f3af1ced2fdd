"""A Spark job that builds sensor features with window functions and registers them as a Delta dataset.

Each run of a "day" is one new, immutable catalog version; training code opens exactly the one it wants:

    python examples/spark_register.py            # local[*] Spark, embedded catalog
    python examples/spark_register.py --master spark://host:7077 --days 5
"""

from __future__ import annotations

import argparse
from typing import Any

import dal
from dal.spark.session import get_spark

DATASET = "weather.sensor_features"


def raw_readings(spark: Any, day: int, stations: int = 4, per_station: int = 144) -> Any:
    """Synthetic 10-minute readings for one day (a stand-in for the job's real input)."""
    from pyspark.sql import functions as F

    n = stations * per_station
    start = 1767225600 + 86400 * day  # 2026-01-01 + day
    return spark.range(n).select(
        F.concat(F.lit("ST"), (F.col("id") % stations).cast("string")).alias("station"),
        F.timestamp_seconds(F.lit(start) + (F.col("id") / stations).cast("long") * 600).alias("ts"),
        (F.lit(10.0) + F.sin(F.col("id") / 20.0) * 5 + F.col("id") % 7 * 0.1).alias("temperature"),
        (F.lit(60.0) + F.cos(F.col("id") / 30.0) * 20).alias("humidity"),
    )


def features(readings: Any) -> Any:
    """Per-station rolling aggregates over the previous hour (range window on event time) and deltas."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    t = F.col("ts").cast("long")
    last_hour = Window.partitionBy("station").orderBy(t).rangeBetween(-3600, 0)
    ordered = Window.partitionBy("station").orderBy("ts")
    return readings.select(
        "station",
        "ts",
        F.to_date("ts").cast("string").alias("date"),
        "temperature",
        "humidity",
        F.avg("temperature").over(last_hour).alias("temp_mean_1h"),
        F.stddev("temperature").over(last_hour).alias("temp_std_1h"),
        F.max("humidity").over(last_hour).alias("humidity_max_1h"),
        (F.col("temperature") - F.lag("temperature").over(ordered)).alias("temp_delta"),
        (F.col("temperature") > F.avg("temperature").over(last_hour) + 2).cast("int").alias("label"),
    )


FRAMES = "weather.radar_frames"


def radar_schema() -> dal.TensorSchema:
    """Tensor fields for a Petastorm dataset: a reflectivity grid (ndarray) and its rendering (png)."""
    import numpy as np

    return dal.TensorSchema("RadarFrame", [
        dal.TensorField("station", np.str_, (), dal.ScalarCodec()),
        dal.TensorField("frame", np.int64, (), dal.ScalarCodec()),
        dal.TensorField("reflectivity", np.float32, (16, 16), dal.NdarrayCodec()),
        dal.TensorField("picture", np.uint8, (16, 16, 3), dal.ImageCodec("png")),
    ])  # fmt: skip


def radar_frames(spark: Any, n: int = 48) -> Any:
    """Synthetic radar frames as Spark arrays; executors encode them (ndarray, png) and write Petastorm."""
    import numpy as np

    rows = []
    for i in range(n):
        y, x = np.mgrid[0:16, 0:16]
        grid = (np.sin((x + i) / 3.0) * np.cos(y / 4.0) * 30 + 30).astype(np.float32)
        level = (grid / 60 * 255).astype(np.uint8)
        picture = np.stack([level, 255 - level, np.full_like(level, 128)], axis=-1)
        rows.append((f"ST{i % 4}", i, grid.tolist(), picture.astype(int).tolist()))
    schema = "station string, frame long, reflectivity array<array<float>>, picture array<array<array<int>>>"
    return spark.createDataFrame(rows, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--days", type=int, default=3)
    args = parser.parse_args()

    spark = get_spark(master=args.master)
    spark.sparkContext.setLogLevel("ERROR")
    for day in range(args.days):
        df = features(raw_readings(spark, day))
        v = dal.write(
            df,
            DATASET,
            partition_by=["date"],
            time_column="ts",
            mode="overwrite" if day == 0 else "append",
            description="Per-station rolling weather features (1h windows), one partition per day",
        )
        print(f"{DATASET}: version {v.number} ({v.operation}) -> {v.row_count:,} rows in {v.file_count} files")

    frames = dal.write(
        radar_frames(spark),
        FRAMES,
        format="petastorm",
        schema=radar_schema(),
        partition_by=["station"],
        mode="overwrite",
        description="Radar frames with tensor fields (Petastorm format, readable by petastorm's make_reader)",
    )
    print(
        f"{FRAMES}: version {frames.number} -> {frames.row_count} frames; petastorm url {dal.open(FRAMES).petastorm_url}"
    )

    # training code pins a version; later writes never change what it reads
    ds = dal.open(DATASET)
    first_day = dal.open(DATASET, ds.number - args.days + 1)
    print(f"latest version {ds.number}: {ds.count():,} rows; version {first_day.number}: {first_day.count():,} rows")
    spark.stop()


if __name__ == "__main__":
    main()
