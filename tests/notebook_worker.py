"""One worker of the tests' shared notebook runs (tests/conftest.py, ``notebook_runs``): ``python notebook_worker.py
PLAN.json``.

The plan lists runs, longest first: ``{"key", "notebook", "out", "overrides", "env"}``. Every worker of a session
reads the same plan and takes the next run no worker has claimed (an ``os.mkdir`` of ``claims/<key>``, which only one
process can win), so two workers keep both cores busy until the list is done, and each pays Python's, torch's and
sagelib's imports once rather than once per notebook. A run is ``sagelib run --profile tiny --only NOTEBOOK --out
OUT`` through the command line's own ``main`` (its exit status is the one the tests judge), with the run's overrides
as ``-y`` and its environment set for the notebook's kernel. Its exit status and everything written to the standard
error while it ran (the kernel's too) land in ``claims/<key>/result.json``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def run_one(spec: dict, claim: Path) -> dict:
    from sagelib import cli

    argv = ["run", "--profile", "tiny", "--only", spec["notebook"], "--out", spec["out"], "--no-progress"]
    if spec.get("overrides"):
        argv += ["-y", json.dumps(spec["overrides"])]
    before = {name: os.environ.get(name) for name in spec.get("env", {})}
    os.environ.update(spec.get("env", {}))
    errors = claim / "stderr.txt"
    sys.stderr.flush()
    saved = os.dup(2)
    with open(errors, "w") as sink:
        os.dup2(sink.fileno(), 2)  # the notebook's kernel inherits it: its last words are caught as well
        try:
            code = cli.main(argv)
        except BaseException:  # a crash of the command itself is a failed run, not a dead worker
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return {"code": code, "stderr": errors.read_text(errors="replace")[-3000:]}


def main(plan_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    claims = Path(plan_path).with_name("claims")
    claims.mkdir(exist_ok=True)
    for spec in plan:
        claim = claims / spec["key"]
        try:
            claim.mkdir()
        except FileExistsError:
            continue  # another worker has it
        result = run_one(spec, claim)
        (claim / "result.json.tmp").write_text(json.dumps(result))
        (claim / "result.json.tmp").replace(claim / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
