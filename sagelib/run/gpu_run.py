"""The whole workbook on a GPU host in one call, and its run kept as recordings (``sagelib gpu-run``).

On the GPU host: the notebook stack from a carried wheelhouse when the image lacks it
(:func:`install_wheelhouse`, see ``scripts/build_wheelhouse.sh``), then ``sagelib run --profile gpu`` into
``OUT/run`` with its output kept in ``OUT/run.log``, the card and the run's exit status and time in
``OUT/gpu.txt`` (with whether the wgmma microbenchmark's machine code really issues wgmma,
:func:`wgmma_sass_lines`), and the run folder packed as ``OUT/run.tgz``. Back on a machine with the
repository, :func:`record` keeps the run as recordings in ``data/results/`` (what CPU-only runs show):

    <date>-<card>-<stem>.json              schema sagelib.run/1: run.json with every notebook's results.json
    <date>-<card>-<stem>-performance.json  notebook 04_performance's sweep (sagelib.bench/1), if the run has it
    <date>-<card>-<stem>-ncu.json          notebook 05_profile's ncu document (sagelib.ncu/1), if the run has it

each with the command and annotations given. A recording is never overwritten: one cited by the experiment log
must keep its hash. These were ``scripts/gpu_run.sh`` and ``scripts/record_gpu_run.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from sagelib import paths
from sagelib.errors import InputError
from sagelib.records import documents

#: What papermill needs to run a notebook; a GPU image often lacks them (the wheelhouse brings them).
NOTEBOOK_STACK = ("papermill", "nbconvert", "jupytext", "ipykernel")
SITE = Path("/tmp/site")  #: where a wheelhouse is installed (not the image's own site-packages)
RUN_SCHEMA = documents.RUN.id


def stack_missing(python: str = sys.executable, env: dict | None = None) -> str | None:
    """None when ``python`` imports the notebook stack; otherwise the import error's last line."""
    done = subprocess.run([python, "-c", "import " + ", ".join(NOTEBOOK_STACK)], capture_output=True, text=True,
                          env=env)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["import failed"])[-1]


def use_site(site: Path, env: dict) -> None:
    """Put a ``--target`` install at ``site`` first on ``env``'s PYTHONPATH, and its ``share/jupyter`` (nbconvert's
    HTML templates, installed as data files beside the packages) first on JUPYTER_PATH, where jupyter looks."""
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    data = site / "share" / "jupyter"
    if data.is_dir():
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(data), env.get("JUPYTER_PATH")]))


def install_wheelhouse(wheelhouse: Path, env: dict, site: Path = SITE) -> str:
    """Install the wheels of ``wheelhouse`` into ``site`` (no index, no dependencies resolved) when the notebook stack
    does not import, and put ``site`` on ``env``'s paths (:func:`use_site`); a line saying what was done."""
    missing = stack_missing(env=env)
    if missing is None:
        if (SITE / "share" / "jupyter").is_dir() and str(SITE) in env.get("PYTHONPATH", ""):
            use_site(SITE, env)  # installed by hand before: its templates still need JUPYTER_PATH
        return "notebook stack: already importable"
    wheels = sorted(str(p) for p in wheelhouse.glob("*.whl"))
    if not wheels:
        raise InputError(f"--wheelhouse {str(wheelhouse)!r}: no .whl files, and the notebook stack does not import "
                         f"({missing}); build one with scripts/build_wheelhouse.sh")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--upgrade", "--target", str(site), *wheels],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise InputError(f"--wheelhouse: pip could not install its wheels: {(done.stderr or done.stdout)[-600:]}")
    use_site(site, env)
    still = stack_missing(env=env)
    if still is not None:
        raise InputError(f"--wheelhouse: installed {len(wheels)} wheels, and the notebook stack still does not "
                         f"import ({still}); rebuild it with scripts/build_wheelhouse.sh for this Python")
    return f"notebook stack: {len(wheels)} wheels from {wheelhouse} installed into {site}"


def gpu_line() -> str:
    """nvidia-smi's name, driver and clocks of each GPU, or why there are none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi: not on PATH"
    done = subprocess.run([smi, "--query-gpu=name,driver_version,clocks.sm,clocks.mem", "--format=csv"],
                          capture_output=True, text=True)
    return (done.stdout or done.stderr).strip()


def wgmma_sass_lines(cache: Path) -> list[str]:
    """For each cached cubin of the wgmma microbenchmark, how many GMMA instructions its SASS holds (it must issue
    wgmma); a line saying why when that cannot be checked."""
    from sagelib.cuda.sass import find_cuobjdump

    cuobjdump = find_cuobjdump()
    cubins = [p for p in sorted(cache.glob("*.cubin")) if b"bench_wgmma" in p.read_bytes()]
    if cuobjdump is None:
        return ["wgmma microbenchmark SASS: not checked (no cuobjdump on PATH or in /usr/local/cuda*/bin)"]
    if not cubins:
        return [f"wgmma microbenchmark SASS: not checked (no cubin with bench_wgmma in {cache})"]
    lines = []
    for cubin in cubins:
        sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True).stdout
        count = sum("GMMA" in line for line in sass.splitlines())
        lines.append(f"wgmma microbenchmark SASS ({cubin.name}): {count} GMMA instructions")
    return lines


def run_notebooks(run_dir: Path, log: Path, env: dict, only=()) -> int:
    """``sagelib run --profile gpu --out run_dir`` in a child (which sees ``env``), its output shown and kept in
    ``log``; its exit status."""
    argv = [sys.executable, "-m", "sagelib", "run", "--profile", "gpu", "--out", str(run_dir), "--no-progress",
            *(f"--only={name}" for name in only)]
    with open(log, "w") as kept:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                 cwd=paths.REPO_ROOT)
        for line in child.stdout:
            sys.stdout.write(line)
            kept.write(line)
        return child.wait()


def pack(run_dir: Path, archive: Path) -> Path:
    """``run_dir`` as one gzipped tar (its folder name at the top), for carrying back."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run_dir, arcname=run_dir.name)
    return archive


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def run_documents(run_dir: Path, command: str, annotations: list[str]) -> dict[str, dict]:
    """suffix -> document, built from the run folder (no file written)."""
    run = _load(run_dir / "run.json")
    environment = _load(run_dir / "environment.json") if (run_dir / "environment.json").exists() else {}
    card = (environment.get("gpus") or ["unknown"])[0]
    created = run.get("finished_utc") or run.get("started_utc")
    for notebook in run["notebooks"]:
        results = run_dir / notebook["name"] / "results.json"
        notebook["results"] = _load(results) if results.exists() else None
    common = {"command": command, "annotations": annotations,
              "hopper_paths": environment.get("hopper_paths", "on")}  # "off (...)" for a --no-hopper run
    out = {"": {"schema": RUN_SCHEMA, "created_utc": created, **common, "device": {"name": card},
                "environment": environment, "run": run}}
    # the notebooks by their names' ends: runs recorded before the renumbering call them 03_performance, 04_profile
    for bench in sorted(run_dir.glob("*_performance/bench.json"))[-1:]:
        out["-performance"] = {**_load(bench), **common, "command": f"{command}; notebook {bench.parent.name}'s sweep"}
    for profile in sorted(run_dir.glob("*_profile/results.json"))[-1:]:
        if "ncu" in _load(profile).get("values", {}):
            ncu = _load(profile)["values"]["ncu"]
            out["-ncu"] = {**ncu, **common,
                           "command": f"{command}; notebook {profile.parent.name} (ncu --clock-control none)"}
    return out


def record(run_dir: Path, stem: str, command: str, annotations: list[str], results_dir=None) -> list[Path]:
    """Write the recordings of the run in ``run_dir`` into ``results_dir`` (default data/results); the paths.
    InputError when the folder is no run, or a recording of that name exists (nothing is then written)."""
    from sagelib.measure import recordings

    if not (run_dir / "run.json").is_file():
        raise InputError(f"--from {str(run_dir)!r}: expected a `sagelib run` folder with run.json")
    docs = run_documents(run_dir, command, annotations)
    card = recordings._slug(docs[""]["device"]["name"])
    folder = documents.resolve(results_dir if results_dir is not None else documents.RESULTS_DIR)
    targets = {suffix: folder / f"{(docs['']['created_utc'] or '')[:10]}-{card}-{stem}{suffix}.json"
               for suffix in docs}
    taken = [str(p) for p in targets.values() if p.exists()]
    if taken:
        raise InputError(f"--record {stem!r}: {', '.join(taken)} already exist(s); recordings are never overwritten, "
                         "pick another stem")
    return [documents.write_json(document, targets[suffix]) for suffix, document in docs.items()]
