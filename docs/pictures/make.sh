#!/bin/sh
# Redraw the pictures of docs/pictures.md and docs/pyspark.md (tests/render/test_cli_render.py and
# tests/render/test_spark_picture.py check they are current).
set -e
cd "$(dirname "$0")/../.."
opid render examples/topologies/fraud_detection.json -o docs/pictures/topology.svg
opid render examples/topologies/fraud_detection.json --format mermaid -o docs/pictures/topology.mmd
opid diff examples/topologies/fraud_detection.json docs/pictures/fraud_detection_changed.json \
    --render svg -o docs/pictures/diff.svg > /dev/null || test $? -eq 1
# The PySpark guide's picture: needs PySpark and Java 17 (tests/render/test_spark_picture.py).
python -m examples.spark.pictures docs/pictures/spark_diff.svg
