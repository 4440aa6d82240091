"""The `ivm` command: refresh, explain and status over a project folder, without Dagster.

    ivm refresh [VIEW ...] --project DIR [--full] [--wait SECONDS]
    ivm explain VIEW --project DIR
    ivm status --project DIR
    ivm doctor [--project DIR]
    ivm demo [--dir DIR]
    ivm spark start|stop|status [--port N] [--conf KEY=VALUE ...] [--idle-timeout SECONDS]
    ivm --version

Exit status 0 on success, 1 on any ivm_assets error (message on stderr) or failed doctor
check, 2 on bad usage.
A refresh that finds a view being refreshed by another process waits for it (``--wait``,
default 300 s), then exits 1 with who holds the view if it is still busy.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from ivm_assets.errors import IvmError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ivm", description="Incrementally maintained SQL views over Delta tables.")
    parser.add_argument("--version", action="version", version=f"ivm_assets {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="bring views up to date with their sources")
    refresh.add_argument("views", nargs="*", metavar="VIEW", help="views to refresh (default: all)")
    refresh.add_argument("--project", default=".", help="project folder holding ivm.yaml (default: .)")
    refresh.add_argument("--full", action="store_true", help="recompute from the sources instead of from changes")
    refresh.add_argument(
        "--wait", type=_seconds, default=None, metavar="SECONDS",
        help="how long to wait for another refresh of the same view to finish (default: 300)",
    )
    explain = sub.add_parser("explain", help="show a view's incremental dataflow and state tables")
    explain.add_argument("view", metavar="VIEW")
    explain.add_argument("--project", default=".")
    status = sub.add_parser("status", help="show each view's last epoch and whether its sources moved")
    status.add_argument("--project", default=".")
    check = sub.add_parser("check", help="compare views with a recompute of their SQL (the oracle)")
    check.add_argument("views", nargs="*", metavar="VIEW")
    check.add_argument("--project", default=".")
    doctor = sub.add_parser(
        "doctor", help="check Python, Java, Spark, the project's sources and warehouse, and dependency versions"
    )
    doctor.add_argument("--project", default=".", help="project folder holding ivm.yaml (default: .)")
    demo = sub.add_parser("demo", help="create a demo shop project, refresh it, change the sources, refresh again")
    demo.add_argument("--dir", default="demo_project", help="where to create the demo project (default: demo_project)")
    spark = sub.add_parser("spark", help="start, stop or show the warm local Spark Connect server that Dagster runs attach to")
    spark.add_argument("action", choices=["start", "stop", "status"])
    spark.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: $IVM_SPARK_CONNECT_PORT or 15002)")
    spark.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the server")
    spark.add_argument(
        "--idle-timeout", type=_seconds, default=None, metavar="SECONDS",
        help="stop the server after this long with no client connected (default: run until `ivm spark stop`)",
    )
    return parser


def _version() -> str:
    try:
        return metadata.version("ivm_assets")
    except metadata.PackageNotFoundError:
        return "(not installed: running from a source tree)"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, found {text!r}")
    return value


def _run(args: argparse.Namespace) -> int:
    from ivm_assets.project import IvmProject

    if args.command == "demo":
        from ivm_assets.demo import run_demo

        return run_demo(args.dir)
    if args.command == "spark":
        from ivm_assets.spark.connect import run_command

        return run_command(args.action, port=args.port, conf=args.conf, idle_timeout_s=args.idle_timeout)
    if args.command == "doctor":
        from ivm_assets.doctor import diagnose

        results = []
        for result in diagnose(args.project):
            print(result.line(), flush=True)
            results.append(result)
        failed = sum(r.failed for r in results)
        print(f"{failed} of {len(results)} checks failed" if failed else f"all {len(results)} checks passed (or skipped)")
        return 1 if failed else 0
    project = IvmProject.load(args.project)
    if args.command == "refresh":
        for result in project.refresh_each(args.views or None, full=args.full, wait=args.wait):
            print(result.summary(), flush=True)
    elif args.command == "explain":
        print(project.explain(args.view))
    elif args.command == "status":
        for status in project.status():
            print(status.summary())
    elif args.command == "check":
        from ivm_assets.engine.oracle import check_views

        failed = 0
        for result in check_views(project, args.views or project.order):
            print(f"{result.view}: {'OK' if result.ok else f'MISMATCH ({result.missing} missing, {result.extra} extra rows)'}")
            failed += not result.ok
        return 1 if failed else 0
    return 0


def run(argv: list[str] | None = None) -> int:
    """The command without stopping Spark afterwards (a caller that runs several keeps one session)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except IvmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    finally:
        # Only a command that used Spark has a session to stop (the module is loaded then);
        # importing it here would cost `ivm --help` pyspark's import.
        session = sys.modules.get("ivm_assets.spark.session")
        if session is not None:
            session.stop_spark()


if __name__ == "__main__":
    sys.exit(main())
