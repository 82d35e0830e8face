"""Time versions of some source files against each other on one GPU, in rotated order.

Use it when the versions differ in code, not in a macro (for macros, SAGELIB_SM90_OPTIONS and
scripts/sweep_sm90.py are simpler). A version is a folder that mirrors repository paths, e.g.
build/ab/fast/kernels/quant_kv.cu. `snapshot` makes one from the working tree or a git revision:

    python3 scripts/ab_sources.py snapshot build/ab/base --rev HEAD kernels/quant_kv.cu sagelib/backends/kernels/quantizers.py
    python3 scripts/ab_sources.py snapshot build/ab/new kernels/quant_kv.cu sagelib/backends/kernels/quantizers.py

`run` (GPU host, repository root) copies each version's files over the working tree and runs the
command once per version and round. Round r starts at version r (rotated), because whatever runs
first in a call tends to read slow. `{out}` in the command becomes that run's folder under --out.
The working tree's own files are put back at the end, also after a failure or Ctrl-C:

    python3 scripts/ab_sources.py run --version base=build/ab/base --version new=build/ab/new --rounds 2 \\
        --out /tmp/ab -- python3 scripts/bench_cuda.py --quant-only --out {out}

--out gets runs.json (order, version, exit status, seconds, folder) and one folder per run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snapshot(dest: Path, paths: list[str], rev: str | None, root: Path = ROOT) -> list[str]:
    """Copy `paths` (repository-relative) into `dest`, from the working tree or from git `rev`."""
    for rel in paths:
        target = dest / _inside(rel, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if rev is None:
            if not (root / rel).is_file():
                raise SystemExit(f"snapshot: {rel} is not a file of the working tree ({root})")
            shutil.copyfile(root / rel, target)
        else:
            shown = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=root, capture_output=True)
            if shown.returncode != 0:
                raise SystemExit(f"snapshot: git show {rev}:{rel} failed: {shown.stderr.decode().strip()}")
            target.write_bytes(shown.stdout)
    return sorted(paths)


def version_files(folder: Path) -> list[str]:
    """Repository-relative paths of every file a version folder holds."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def rotated(names: list[str], rounds: int) -> list[str]:
    return [names[(r + i) % len(names)] for r in range(rounds) for i in range(len(names))]


def run(versions: dict[str, Path], command: list[str], rounds: int, out: Path, root: Path = ROOT) -> list[dict]:
    files = sorted({f for folder in versions.values() for f in version_files(folder)})
    for name, folder in versions.items():
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            raise SystemExit(f"--version {name}={folder}: has no {', '.join(missing)}; every version must hold the "
                             f"same files (make them with `snapshot`)")
    for rel in files:
        _inside(rel, root)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    with tempfile.TemporaryDirectory() as keep:
        saved = Path(keep)
        for rel in files:  # the working tree's own files, put back in `finally`
            if (root / rel).exists():
                (saved / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / rel, saved / rel)
        try:
            for order, name in enumerate(rotated(list(versions), rounds), 1):
                for rel in files:
                    shutil.copyfile(versions[name] / rel, root / rel)
                folder = out / f"{order:02d}-{name}"
                folder.mkdir(exist_ok=True)
                argv = [part.replace("{out}", str(folder)) for part in command]
                start = time.monotonic()
                with open(folder / "log.txt", "w") as log:
                    status = subprocess.run(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT).returncode
                records.append({"order": order, "version": name, "exit": status,
                                "seconds": round(time.monotonic() - start, 2), "folder": str(folder)})
                print(f"{order:>3}  {name:<16} exit {status}  {records[-1]['seconds']:.1f} s", flush=True)
        finally:
            for rel in files:
                if (saved / rel).exists():
                    shutil.copyfile(saved / rel, root / rel)
                else:
                    (root / rel).unlink(missing_ok=True)
    (out / "runs.json").write_text(json.dumps({"command": command, "files": files, "runs": records}, indent=1))
    return records


def _inside(rel: str, root: Path) -> str:
    path = (root / rel).resolve()
    if Path(rel).is_absolute() or not path.is_relative_to(root.resolve()):
        raise SystemExit(f"path {rel!r}: expected a path inside the repository ({root}), relative to its root")
    return rel


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    snap = sub.add_parser("snapshot", help="make a version folder from the working tree or --rev")
    snap.add_argument("dest", type=Path)
    snap.add_argument("paths", nargs="+", help="repository-relative files")
    snap.add_argument("--rev", default=None, help="a git revision (default: the working tree)")
    go = sub.add_parser("run", help="run a command once per version and round, rotated")
    go.add_argument("--version", action="append", required=True, metavar="NAME=FOLDER")
    go.add_argument("--rounds", type=int, default=2)
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command; {out} is the run's folder")
    args = parser.parse_args(argv)
    if args.what == "snapshot":
        print("\n".join(snapshot(args.dest, args.paths, args.rev)))
        return 0
    versions = {}
    for item in args.version:
        name, sep, folder = item.partition("=")
        if not sep or not name or not Path(folder).is_dir():
            parser.error(f"--version {item!r}: expected NAME=FOLDER with an existing folder (make it with `snapshot`)")
        versions[name] = Path(folder)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("the command is missing: put it after --, e.g. -- python3 scripts/bench_cuda.py --out {out}")
    if args.rounds < 1:
        parser.error(f"--rounds: expected at least 1, got {args.rounds}")
    records = run(versions, command, args.rounds, args.out)
    return 0 if all(r["exit"] == 0 for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
