"""Keep a GPU run of the workbook as recordings in data/results (what CPU-only runs show).

Usage (on this machine, after fetching the run folder from the GPU host):
    python3 scripts/record_gpu_run.py RUN_DIR --stem gpu-run-hopper --command "..." [--annotation TEXT]...

RUN_DIR is the folder `sagelib run --profile gpu --out RUN_DIR` wrote (scripts/gpu_run.sh packs
it as run.tgz). Writes, named <date>-<card>-<stem>...json:
  <stem>.json              schema sagelib.run/1: run.json with every notebook's results.json
                           (notebook 03's CPU fallback shows its headlines)
  <stem>-performance.json  notebook 04's sweep (sagelib.bench/1), if the run has it
  <stem>-ncu.json          notebook 05's ncu document (sagelib.ncu/1), if the run has it
each with the command and annotations given. It never overwrites a file: a recording
cited by the experiment log must keep its hash. Then add each to the inventory
(`sagelib inventory add PATH --kind timing|profiler_report --command ... --environment RUN_DIR/environment.json`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sagelib.measure import recordings as bench_records


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def documents(run_dir: Path, command: str, annotations: list[str]) -> dict[str, dict]:
    """suffix -> document, built from the run folder (no file written)."""
    run = _load(run_dir / "run.json")
    environment = _load(run_dir / "environment.json") if (run_dir / "environment.json").exists() else {}
    card = (environment.get("gpus") or ["unknown"])[0]
    created = run.get("finished_utc") or run.get("started_utc")
    for notebook in run["notebooks"]:
        results = run_dir / notebook["name"] / "results.json"
        notebook["results"] = _load(results) if results.exists() else None
    common = {"command": command, "annotations": annotations}
    out = {"": {"schema": "sagelib.run/1", "created_utc": created, **common, "device": {"name": card},
                "environment": environment, "run": run}}
    bench = run_dir / "04_performance" / "bench.json"
    if bench.exists():
        out["-performance"] = {**_load(bench), **common, "command": f"{command}; notebook 04_performance's sweep"}
    profile = run_dir / "05_profile" / "results.json"
    if profile.exists() and "ncu" in _load(profile).get("values", {}):
        ncu = _load(profile)["values"]["ncu"]
        out["-ncu"] = {**ncu, **common, "command": f"{command}; notebook 05_profile (ncu --clock-control none)"}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--stem", required=True, help="file stem, e.g. gpu-run-hopper")
    parser.add_argument("--command", required=True, help="the command that produced the run")
    parser.add_argument("--annotation", action="append", default=[], help="a note kept with every document")
    parser.add_argument("--out", default=str(bench_records.RESULTS_DIR), help="results folder")
    args = parser.parse_args(argv)
    if not (args.run_dir / "run.json").exists():
        print(f"run_dir: expected a `sagelib run` folder with run.json, got {args.run_dir}", file=sys.stderr)
        return 2
    docs = documents(args.run_dir, args.command, args.annotation)
    card = bench_records._slug(docs[""]["device"]["name"])
    targets = {suffix: Path(bench_records.resolve(args.out))
               / f"{docs['']['created_utc'][:10]}-{card}-{args.stem}{suffix}.json"
               for suffix in docs}
    taken = [str(p) for p in targets.values() if p.exists()]
    if taken:
        print(f"--stem: {', '.join(taken)} already exist(s); recordings are never overwritten, pick another stem",
              file=sys.stderr)
        return 2
    for suffix, document in docs.items():
        print(bench_records.write_json(document, targets[suffix]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
