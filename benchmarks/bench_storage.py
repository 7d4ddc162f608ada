# ruff: noqa: E501
"""Checkpoints and savepoints read from an S3 API on loopback (moto's server, as the tests
start it): the whole corpus of tests/data read from s3:// and s3a:// against the local reading,
and the requests and bytes a 5,000-batch checkpoint costs, counted by the server.

The 5,000-batch checkpoint: a real spark-restart checkpoint (Spark 4.3, a stateful
aggregation, 2 batches) whose offset and commit logs are extended to batches 0..4999 with its
own last entries (Spark's file format, as HDFSMetadataLog writes them: the same offsets, so
the file source reads nothing new), uploaded without .crc files (S3A writes none).

    python benchmarks/bench_storage.py             # both parts
    python benchmarks/bench_storage.py --batches   # the 5,000-batch figure only
    python benchmarks/bench_storage.py --verdicts  # Spark verdicts: every spark-restart pair
    python benchmarks/bench_storage.py --azure     # the readings corpus from Azurite
    python benchmarks/bench_storage.py --verdicts --azure  # the verdicts from abfss://
    python benchmarks/bench_storage.py --gcs       # the readings corpus from a GCS emulator

``--verdicts``: each of the 66 pairs of tests/data/spark-restart (Spark 4.3) judged on its
checkpoint locally, from ``s3://`` and from ``s3a://``, by ``pytest_opid.check_restore`` with
query B live in this process's session and by ``opid check-restore URL --spark MODULE:job``;
the verdict's JSON (the location aside) and the exit code must be the local one's.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import shutil
import sys
import tarfile
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "tests" / "data"
_spec = importlib.util.spec_from_file_location(
    "s3_loopback", HERE.parent / "tests/storage/s3_loopback.py"
)
assert _spec is not None and _spec.loader is not None
loopback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loopback)

from pytest_opid.cli import main  # noqa: E402


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue()


def _same(here: tuple[int, str], there: tuple[int, str], local: Path, url: str) -> bool:
    """The reading from ``url`` is the local one: the exit code, and the output but for the
    location."""
    return here[0] == there[0] and there[1].replace(url, "X") == here[1].replace(str(local), "X")


def five_thousand(endpoint: str, root: Path) -> None:
    s3 = loopback.client(endpoint)
    s3.create_bucket(Bucket="big")
    tarball = sorted((DATA / "spark-restart" / "checkpoints").glob("*.tar.gz"))[0]
    with tarfile.open(tarball) as tar:
        tar.extractall(root / "big", filter="data")
    ckpt = root / "big" / "checkpoint"
    for crc in ckpt.rglob("*.crc"):
        crc.unlink()
    for log in ("offsets", "commits"):
        last = max(int(p.name) for p in (ckpt / log).iterdir() if p.name.isdigit())
        text = (ckpt / log / str(last)).read_bytes()
        for batch in range(last + 1, 5000):
            (ckpt / log / str(batch)).write_bytes(text)
    files = [p for p in ckpt.rglob("*") if p.is_file()]
    for path in files:
        s3.put_object(
            Bucket="big", Key=f"q/{path.relative_to(ckpt).as_posix()}", Body=path.read_bytes()
        )
    return ckpt, len(files)


def main_bench(corpus: bool) -> None:
    with loopback.moto_s3() as (endpoint, counted), tempfile.TemporaryDirectory() as tmp:
        import os

        os.environ.update(loopback.environment(endpoint))
        root = Path(tmp)
        ckpt, n = five_thousand(endpoint, root)
        for url in ("s3://big/q", "s3a://big/q"):
            counted.reset()
            started = time.perf_counter()
            code, out = run("checkpoint", url, "--json")
            took = time.perf_counter() - started
            local = run("checkpoint", str(ckpt), "--json")[1]
            same = out.replace(url, "X") == local.replace(str(ckpt), "X")
            print(
                f"5,000 batches ({n} objects) {url}: exit {code}, {counted.requests} requests, "
                f"{counted.bytes} bytes served, {took:.2f} s, same as local: {same}"
            )
        if not corpus:
            return
        s3 = loopback.client(endpoint)
        s3.create_bucket(Bucket="corpus")
        corpus_readings(
            root,
            lambda local, name: loopback.upload(s3, "corpus", local, name),
            {"s3": "s3://corpus/", "s3a": "s3a://corpus/"},
        )


def corpus_readings(root: Path, put: Any, prefixes: dict[str, str]) -> None:
    """Every Spark checkpoint (spark-restart, -35, upgrade-restart) read from each URL prefix,
    every Flink savepoint read and judged from the first, against the local readings."""
    equal = total = 0
    for data_set in ("spark-restart", "spark-restart-35", "upgrade-restart"):
        for tarball in sorted((DATA / data_set / "checkpoints").glob("*.tar.gz")):
            name = f"{data_set}/{tarball.name.removesuffix('.tar.gz')}"
            with tarfile.open(tarball) as tar:
                tar.extractall(root / name, filter="data")
            local = root / name / "checkpoint"
            put(local, name)
            here = run("checkpoint", str(local), "--json")
            for prefix in prefixes.values():
                url = f"{prefix}{name}"
                there = run("checkpoint", url, "--json")
                total += 1
                if _same(here, there, local, url):
                    equal += 1
                else:
                    print("DIFFERS", url)
            shutil.rmtree(root / name)
    schemes = " and ".join(f"{scheme}://" for scheme in prefixes)
    print(f"Spark checkpoints: {equal}/{total} readings from {schemes} equal to the local ones")
    cases = _cases(DATA / "flink-restore" / "cases.jsonl.gz")
    equal = total = 0
    first = next(iter(prefixes.values()))
    for case in cases:
        seed = case["case"]["seed"]
        with tarfile.open(DATA / "flink-restore" / case["savepoint"]) as tar:
            tar.extractall(root / f"f{seed}", filter="data")
        local = root / f"f{seed}" / case["savepoint_root"]
        put(local, f"flink/{seed}")
        program = root / f"after{seed}.json"
        program.write_text(json.dumps(case["after"]))
        url = f"{first}flink/{seed}"
        pairs = [
            (run("savepoint", str(local), "--json"), run("savepoint", url, "--json")),
            (
                run("check-restore", str(local), str(program)),
                run("check-restore", url, str(program)),
            ),
        ]
        for here, there in pairs:
            total += 1
            if _same(here, there, local, url):
                equal += 1
            else:
                print("DIFFERS", url)
        shutil.rmtree(root / f"f{seed}")
    print(
        f"Flink savepoints: {equal}/{total} readings and verdicts from {first.split(':')[0]}:// "
        "equal to the local ones"
    )


def azure_corpus() -> None:
    """The corpus from Azurite (tests/storage/azurite.py): abfss://, abfs:// and az://."""
    import os

    sys.path.insert(0, str(HERE.parent))
    from tests.storage import azurite

    with tempfile.TemporaryDirectory() as tmp, azurite.azurite(Path(tmp)) as endpoint:
        os.environ.update(azurite.environment(endpoint))
        service = azurite.client(endpoint)
        service.create_container("corpus")
        host = f"corpus@{azurite.ACCOUNT}.dfs.core.windows.net"
        corpus_readings(
            Path(tmp),
            lambda local, name: azurite.upload(service, "corpus", local, name),
            {"abfss": f"abfss://{host}/", "abfs": f"abfs://{host}/", "az": "az://corpus/"},
        )


def gcs_corpus() -> None:
    """The corpus from gcp-storage-emulator (as tests/storage/test_gcs_urls.py starts it)."""
    import os
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
         "--port", str(port), "--in-memory"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(3)
        os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
        os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        bucket = storage.Client(credentials=AnonymousCredentials(), project="t").create_bucket(
            "corpus"
        )

        def put(local: Path, name: str) -> None:
            for path in sorted(local.rglob("*")):
                rel = path.relative_to(local).as_posix()
                if path.is_file():
                    bucket.blob(f"{name}/{rel}").upload_from_filename(str(path))
                elif not any(path.iterdir()):  # the placeholder the GCS connector writes
                    bucket.blob(f"{name}/{rel}/").upload_from_string(b"")

        with tempfile.TemporaryDirectory() as tmp:
            corpus_readings(Path(tmp), put, {"gs": "gs://corpus/", "gcs": "gcs://corpus/"})
    finally:
        child.terminate()
        child.wait(10)


def verdicts(azure: bool = False) -> None:
    """Every spark-restart pair's verdict from the store against the local one (API and CLI):
    from moto's S3 (``s3://``, ``s3a://``), or with ``azure`` from Azurite (``abfss://``)."""
    import os
    import textwrap
    from contextlib import ExitStack

    from pytest_opid.io.storage import read_totals

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.path.insert(0, str(HERE.parent))
    from pyspark.sql import SparkSession

    from tests.spark.restart_cases import extract, load_cases, paths

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        root = Path(tmp)
        (root / "jobs").mkdir()
        sys.path.insert(0, str(root / "jobs"))
        if azure:
            from tests.storage import azurite

            endpoint = stack.enter_context(azurite.azurite(root))
            os.environ.update(azurite.environment(endpoint))
            service = azurite.client(endpoint)
            service.create_container("verdicts")
            host = f"verdicts@{azurite.ACCOUNT}.dfs.core.windows.net"
            prefixes = {"abfss": f"abfss://{host}/"}
            counted = None  # Azurite counts nothing: our own count of requests

            def put(local: Path, name: str) -> None:
                azurite.upload(service, "verdicts", local, name)
        else:
            endpoint, counted = stack.enter_context(loopback.moto_s3())
            os.environ.update(loopback.environment(endpoint))
            s3 = loopback.client(endpoint)
            s3.create_bucket(Bucket="verdicts")
            prefixes = {"s3": "s3://verdicts/", "s3a": "s3a://verdicts/"}

            def put(local: Path, name: str) -> None:
                loopback.upload(s3, "verdicts", local, name)

        cases = load_cases()
        equal = total = 0
        codes: dict[int, int] = {}
        requests = 0
        started = time.perf_counter()
        for n, (case_id, rec) in enumerate(sorted(cases.items())):
            folder = extract(rec, root / "cases")
            local = folder / "checkpoint"
            put(local, case_id)
            module = f"job{n}"
            (root / "jobs" / f"{module}.py").write_text(
                rec["after_code"]
                + textwrap.dedent(
                    f"""

                    def job(spark, root):
                        return build(spark, {{k: root + "/" + k for k in {list(paths(Path("x")))!r}}})
                    """
                )
            )
            conf = [a for k, v in rec["session_conf_after"].items() for a in ("--conf", f"{k}={v}")]

            here = _judged(spark, rec, folder, module, conf, str(local))
            codes[here[0]] = codes.get(here[0], 0) + 1
            for scheme, prefix in prefixes.items():
                before = read_totals()[0]
                if counted is not None:
                    counted.reset()
                there = _judged(spark, rec, folder, module, conf, f"{prefix}{case_id}")
                sent = counted.requests if counted is not None else read_totals()[0] - before
                requests = max(requests, sent)
                total += 1
                if there == here:
                    equal += 1
                else:
                    print(
                        "DIFFERS", scheme, case_id, here[0], there[0], here[2], there[2], flush=True
                    )
            shutil.rmtree(folder)
        took = time.perf_counter() - started
        print(
            f"Spark verdicts: {equal}/{total} from {' and '.join(f'{k}://' for k in prefixes)} "
            "equal to the local ones "
            f"(API and CLI, JSON and exit code; local exit codes {dict(sorted(codes.items()))}); "
            f"at most {requests} requests ({'served' if counted else 'sent'}) for a URL's two "
            f"checks, {took:.0f} s"
        )


def _judged(
    spark: Any, rec: dict[str, Any], folder: Path, module: str, conf: list[str], where: str
) -> tuple[int, str, int, str]:
    """The verdict on the checkpoint at ``where``: the API's exit code and JSON, the CLI's
    (``opid check-restore WHERE --spark MODULE:job``), the location taken out of both."""
    import pytest_opid
    from tests.spark.restart_cases import build

    check = pytest_opid.check_restore(where, build(spark, rec, "after", folder))
    api_code = 0 if check.safe is True else 3 if check.safe is None else 1
    api = json.dumps(check.to_dict(), sort_keys=True).replace(where, "X")
    cli_code, cli = run(
        "check-restore", "--json", where, "--spark", f"{module}:job", *conf, "--", str(folder)
    )
    return api_code, api, cli_code, cli.replace(where, "X")


def _cases(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


if __name__ == "__main__":
    if "--verdicts" in sys.argv:
        verdicts(azure="--azure" in sys.argv)
    elif "--azure" in sys.argv:
        azure_corpus()
    elif "--gcs" in sys.argv:
        gcs_corpus()
    else:
        main_bench(corpus="--batches" not in sys.argv)
