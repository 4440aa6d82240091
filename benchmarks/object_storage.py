"""Object storage benchmark: the TPC-H refresh on a local S3 server against a local folder.

Starts a local S3 server (moto's, on 127.0.0.1, a free port; stopped by its process id at the
end), loads the same generated TPC-H data into Delta sources in a local folder and in a
bucket, builds a few TPC-H views on each, then applies the same TPC-H-style refresh batches
(RF1 new orders, RF2 random deletes, dimension updates; ``ivm_assets.tpch``) to both
and refreshes every view after each, in one warm process (as a long-lived Dagster code
server or service would). Times each incremental refresh and counts the requests the S3
server answered for it (from its request log). Printed, not asserted.

    python benchmarks/object_storage.py [--sf 0.1] [--views q01,q03,q06,q10] [--batches 4] [--batch-fraction 0.001]

Results go to benchmarks/results/object_storage.json and .md.

    python benchmarks/object_storage.py --full-build [--sf 0.1] [--views q03,q10] [--before DIR]

measures full builds on S3 instead: each view built from scratch in a fresh process, timed,
with the driver's peak memory (VmHWM of the Python process, and of the JVM, which in local
mode hosts the executors too). ``--before DIR`` also runs the same builds with the ivm_assets
found in DIR (e.g. ``git archive <commit> | tar -x -C DIR``), to compare with an older version.
Results go to benchmarks/results/object_storage_full_build.json and .md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
# A child build (--child-build FOLDER VIEW --code DIR) imports the ivm_assets found in DIR.
_CODE = sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv else str(HERE.parent)
sys.path.insert(0, _CODE)
sys.path.insert(0, str(HERE))

from ivm_assets import IvmProject  # noqa: E402
from ivm_assets.delta import storage  # noqa: E402
from ivm_assets.spark.session import get_spark, stop_spark  # noqa: E402
from ivm_assets.tpch import create_sources, generate_parquet, make_batches  # noqa: E402
from tpch_refresh import write_project  # noqa: E402  (benchmarks/: every benchmark's TPC-H project)

SQL_DIR = HERE / "tpch"
DATA_DIR = HERE / "data"
RESULTS = HERE / "results" / "object_storage"
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)?([A-Z]+) (\S+) HTTP/1\.[01]')


class LocalS3:
    """A moto S3 server in a process of its own, its requests counted from its log."""

    def __init__(self, log: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        with open(log, "w") as out:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        self.options = {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench", "AWS_ALLOW_HTTP": "true",
        }

    def create_bucket(self, name: str) -> None:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(
            access_key="bench", secret_key="bench", region="us-east-1", endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
            allow_bucket_creation=True,
        )
        fs.create_dir(name)

    def requests(self) -> int:
        """Requests answered so far (the server logs each after answering it: wait until the log is still)."""
        seen = -1
        while True:
            count = sum(1 for line in self.log.read_text(errors="replace").splitlines() if _REQUEST.search(line))
            if count == seen:
                return count
            seen = count
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def project_at(folder: Path, warehouse: str, sources: dict[str, str], views: list[str], options: dict[str, str] | None) -> IvmProject:
    return IvmProject.load(write_project(folder, sources, views, warehouse=warehouse, storage_options=options))


def run_store(name: str, spark, parquet: Path, root: str, folder: Path, views: list[str], args, s3: LocalS3 | None) -> dict:
    """Build the views on ``root`` (a folder or an s3:// URI), then time each view's refresh after each batch."""
    print(f"== {name}: sources and warehouse under {root}", flush=True)
    if s3 is not None:
        storage.register(root, s3.options, origin="benchmarks/object_storage.py")
    started = time.perf_counter()
    sources = create_sources(parquet, root + "/sources")
    load_s = time.perf_counter() - started
    project = project_at(folder, root + "/warehouse", sources, views, s3.options if s3 else None)
    builds = {}
    for view in views:
        began = time.perf_counter()
        [result] = project.refresh([view])
        builds[view] = time.perf_counter() - began
        print(f"  build {view}: {builds[view]:.2f}s ({result.mode})", flush=True)
    batches = make_batches(spark, sources, args.batch_fraction, seed=20261125)
    refreshes: dict[str, list[dict]] = {v: [] for v in views}
    for batch in range(args.batches + 1):
        batches.apply()
        for view in views:
            before = s3.requests() if s3 else None
            began = time.perf_counter()
            [result] = project.refresh([view])
            seconds = time.perf_counter() - began
            requests = s3.requests() - before if s3 else None
            if batch == 0:
                continue  # warm-up: JIT, caches
            refreshes[view].append({"seconds": seconds, "requests": requests, "mode": result.mode, "engine": result.engine})
            print(f"  batch {batch} {view}: {seconds:.3f}s {result.mode} ({result.engine}), requests {requests}", flush=True)
    noop = {}
    for view in views:
        before = s3.requests() if s3 else None
        began = time.perf_counter()
        project.refresh([view])
        noop[view] = {"seconds": time.perf_counter() - began, "requests": s3.requests() - before if s3 else None}
    return {"load_s": load_s, "build_s": builds, "refreshes": refreshes, "noop": noop}


def _peak_kib(pid: int) -> int | None:
    """A process's peak resident memory (VmHWM) in KiB; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None


def _jvm_pid() -> int | None:
    """The JVM this process started (local Spark's driver, executors inside)."""
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = f.read().rsplit(")", 1)[1].split()[1]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if parent == me and b"java" in command:
            return int(entry)
    return None


def child_build(folder: str, view: str) -> None:
    """Build ``view`` of the project in ``folder`` from scratch in this fresh process; print
    the time and the peak memories as JSON (the last line)."""
    project = IvmProject.load(folder)
    began = time.perf_counter()
    [result] = project.refresh([view])
    seconds = time.perf_counter() - began
    found = {"seconds": seconds, "mode": result.mode, "python_hwm_mib": _peak_kib(os.getpid()) / 1024}
    jvm = _jvm_pid()
    found["jvm_hwm_mib"] = _peak_kib(jvm) / 1024 if jvm else None
    print(json.dumps(found), flush=True)


def full_builds(args, views: list[str]) -> None:
    """Each view built from scratch on S3 in a fresh process (see the module doc)."""
    parquet = generate_parquet(args.sf, DATA_DIR)
    run_dir = DATA_DIR / f"object_storage_full_sf{args.sf:g}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    load = os.getloadavg()
    s3 = LocalS3(run_dir / "s3_requests.log")
    codes = {"now": str(HERE.parent), **({"before": str(Path(args.before).resolve())} if args.before else {})}
    runs: list[dict] = []
    try:
        s3.create_bucket("bench")
        root = "s3://bench/tpch"
        storage.register(root, s3.options, origin="benchmarks/object_storage.py")
        sources = create_sources(parquet, root + "/sources")
        for view in views:
            for code, where in codes.items():
                folder = run_dir / f"project_{view}_{code}"
                project_at(folder, f"{root}/warehouse_{view}_{code}", sources, [view], s3.options)
                env = {**os.environ, "IVM_SPARK_MASTER": os.environ.get("IVM_SPARK_MASTER", "local[2]")}
                command = [sys.executable, __file__, "--child-build", str(folder), view, "--code", where]
                done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=7200)
                if done.returncode != 0:
                    raise RuntimeError(f"{view} ({code}) failed: {done.stderr[-3000:]}")
                found = {"view": view, "code": code, **json.loads(done.stdout.strip().splitlines()[-1])}
                runs.append(found)
                print(f"  {view} {code}: {found}", flush=True)
    finally:
        s3.stop()
    meta = {
        "date": datetime.date.today().isoformat(), "sf": args.sf, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average_at_start": load, "load_average_at_end": os.getloadavg(), "spark_master": os.environ.get("IVM_SPARK_MASTER", "local[2]"),
    }
    out = HERE / "results" / "object_storage_full_build"
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=2) + "\n")
    lines = ["| view | code | build s | driver (Python) peak MiB | JVM peak MiB |", "|---|---|---|---|---|"]
    for r in runs:
        jvm = f"{r['jvm_hwm_mib']:.0f}" if r["jvm_hwm_mib"] else "?"
        lines.append(f"| {r['view']} | {r['code']} | {r['seconds']:.1f} | {r['python_hwm_mib']:.0f} | {jvm} |")
    text = (
        f"# Full builds on S3: TPC-H SF {args.sf:g}, one fresh process per build\n\n"
        f"{meta['date']}, {meta['machine']}, {meta['spark_master']}, load average {load[0]:.2f} at start and "
        f"{meta['load_average_at_end'][0]:.2f} at end; S3 is a local moto server. The JVM is local Spark's driver with "
        "its executors inside.\n\n" + "\n".join(lines) + "\n"
    )
    out.with_suffix(".md").write_text(text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf", type=float, default=0.1)
    parser.add_argument("--views", default="q01,q03,q06,q10")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-fraction", type=float, default=0.001)
    parser.add_argument("--full-build", action="store_true", help="measure full builds on S3 (time, peak memory)")
    parser.add_argument("--before", help="with --full-build: a folder holding an older ivm_assets to compare with")
    args = parser.parse_args()
    views = args.views.split(",")
    if args.full_build:
        full_builds(args, views)
        return
    parquet = generate_parquet(args.sf, DATA_DIR)
    run_dir = DATA_DIR / f"object_storage_sf{args.sf:g}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    load = os.getloadavg()
    spark = get_spark()
    s3 = LocalS3(run_dir / "s3_requests.log")
    try:
        s3.create_bucket("bench")
        results = {
            "folder": run_store("folder", spark, parquet, str(run_dir / "folder"), run_dir / "project_folder", views, args, None),
            "s3": run_store("s3", spark, parquet, "s3://bench/tpch", run_dir / "project_s3", views, args, s3),
        }
    finally:
        s3.stop()
        stop_spark()
    summary = []
    for view in views:
        row = {"view": view}
        for store, found in results.items():
            times = [r["seconds"] for r in found["refreshes"][view]]
            requests = [r["requests"] for r in found["refreshes"][view] if r["requests"] is not None]
            row[f"{store}_build_s"] = round(found["build_s"][view], 3)
            row[f"{store}_median_s"] = round(statistics.median(times), 3)
            row[f"{store}_median_requests"] = statistics.median(requests) if requests else None
            row[f"{store}_engines"] = sorted({str(r["engine"]) for r in found["refreshes"][view]})
            row[f"{store}_noop_requests"] = found["noop"][view]["requests"]
        row["s3_vs_folder"] = round(row["s3_median_s"] / row["folder_median_s"], 2)
        summary.append(row)
    meta = {
        "date": datetime.date.today().isoformat(), "sf": args.sf, "batches": args.batches, "batch_fraction": args.batch_fraction,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_average_at_start": load,
        "server": "moto_server (local, no credential checks)",
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.with_suffix(".json").write_text(json.dumps({"meta": meta, "summary": summary, "runs": results}, indent=2) + "\n")
    header = ["view", "folder build s", "S3 build s", "folder median s", "S3 median s", "S3/folder", "S3 requests/refresh", "S3 no-op requests"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in summary:
        cells = [r["view"], r["folder_build_s"], r["s3_build_s"], r["folder_median_s"], r["s3_median_s"], r["s3_vs_folder"],
                 r["s3_median_requests"], r["s3_noop_requests"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    text = (
        f"# Object storage: TPC-H SF {args.sf:g}, {args.batches} timed batches of {args.batch_fraction:.1%} (after one warm-up)\n\n"
        f"{meta['date']}, {meta['machine']}, load average at start {load[0]:.2f}; S3 is a local moto server "
        "(no network latency: requests cost what a local HTTP server costs).\n\n" + "\n".join(lines) + "\n"
    )
    RESULTS.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    if "--child-build" in sys.argv:
        at = sys.argv.index("--child-build")
        child_build(sys.argv[at + 1], sys.argv[at + 2])
    else:
        main()
