"""sagelib.measure.distribute and the commands' --gpus/--scheduler, on a local CPU Dask cluster (no GPU):
placement arguments, sharding, the merge into one document like the in-process run's, and a worker killed
mid-sweep losing no case and counting none twice."""

import json
import os
import signal
import sys

import pytest

from sagelib import cli
from sagelib.errors import KernelUnavailable, UsageError
from sagelib.measure import distribute
from sagelib.measure.bench import failed_records

distributed = pytest.importorskip("distributed", reason="the Dask tests need distributed (the test extra has it)")

from fake_cases import fails_on_three, seen_device, slow_square  # noqa: E402  (tests/ is on the workers' path: see client)

# ----------------------------------------------------------------- arguments


@pytest.mark.parametrize("gpus, scheduler, expected", [
    (None, None, None),
    ("2", None, distribute.Placement(gpus=2)),
    ("all", None, distribute.Placement(gpus="all")),
    ("ALL", None, distribute.Placement(gpus="all")),
    (None, " tcp://h:8786 ", distribute.Placement(scheduler="tcp://h:8786")),
])
def test_placement_from_the_flags(gpus, scheduler, expected):
    assert distribute.placement(gpus, scheduler) == expected


@pytest.mark.parametrize("gpus, scheduler, message", [
    ("0", None, "--gpus: expected a whole number of 1 or more, or all, got '0'"),
    ("two", None, "got 'two'"),
    ("-1", None, "got '-1'"),
    ("2", "tcp://h:8786", "give one"),
    (None, "  ", "--scheduler: expected an address"),
])
def test_bad_placement_flags_are_refused(gpus, scheduler, message):
    with pytest.raises(UsageError, match=message):
        distribute.placement(gpus, scheduler)


def test_missing_dask_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(KernelUnavailable, match=r"pip install -e '\.\[dask\]'.*build_wheelhouse.sh --dask"):
        distribute.require_dask()


# ----------------------------------------------------------------- a CPU cluster of two worker processes


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes offering GPU=1 each, seeing "device" 0 or 1 alone (the cluster --gpus
    starts where dask_cuda does not import); they import the case functions from tests/fake_cases.py."""
    here = os.path.dirname(os.path.abspath(__file__))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
        cluster = distribute.per_gpu_cluster(["0", "1"], dashboard_address=":0")
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_cases_are_sharded_over_the_gpu_workers_and_merged_in_order(client, tmp_path):
    results = distribute.map_cases(client, slow_square, [(i, str(tmp_path), 0.2) for i in range(10)],
                                   progress=False)
    assert [(i, sq) for i, sq, _ in results] == [(i, i * i) for i in range(10)]
    assert len({pid for _, _, pid in results}) == 2  # both workers took cases
    assert distribute.gpu_workers(client) == sorted(client.scheduler_info(n_workers=-1)["workers"])
    devices = distribute.map_cases(client, seen_device, list(range(6)), progress=False)
    assert set(devices) == {"0", "1"}  # each worker sees its own device alone


def test_a_worker_killed_mid_sweep_loses_no_case_and_counts_none_twice(client, tmp_path):
    n = 12
    pids = client.run(os.getpid)  # address -> pid of each worker process
    killed = []

    def kill_one_busy_worker(i, result):
        if killed:
            return
        victim = next(pid for pid in pids.values() if pid != result[2])  # the other worker: it holds a case now
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)

    results = distribute.map_cases(client, slow_square, [(i, str(tmp_path), 0.4) for i in range(n)],
                                   progress=False, on_result=kill_one_busy_worker)
    assert killed
    assert [(i, sq) for i, sq, _ in results] == [(i, i * i) for i in range(n)]  # each case once, in order
    started = [name.split("-") for name in os.listdir(tmp_path)]
    on_victim = {int(i) for i, pid in started if int(pid) == killed[0]}
    finished_on = {i: pid for i, _, pid in results}
    rerun = [i for i in on_victim if finished_on[i] != killed[0]]
    assert rerun, f"no case the killed worker had started was run again elsewhere: {started}"
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it, for the tests after this one


def test_a_case_that_raises_is_named_after_the_others_came_back(client, tmp_path):
    with pytest.raises(distribute.CasesFailed, match=r"1 of 5 case task\(s\) failed.*case 3 \(3\): ValueError: bad"):
        distribute.map_cases(client, fails_on_three, list(range(5)), progress=False)


TIMED = ("stats", "tops", "fraction_of")


def content(document: dict) -> dict:
    """A bench document without what differs from run to run: when it was made, each case's timings."""
    return {**{k: v for k, v in document.items() if k not in ("created_utc", "placement")},
            "environment": {k: v for k, v in document["environment"].items() if k != "timestamp_utc"},
            "records": [{k: v for k, v in r.items() if k not in TIMED} for r in document["records"]]}


# ----------------------------------------------------------------- the commands


@pytest.fixture
def thread_cluster(monkeypatch):
    """--gpus starts an in-process CPU cluster of two workers offering GPU=1, in place of dask-cuda's; the
    environment capture (nvidia-smi, nvcc, git: seconds) reads the same fixed answer in every thread."""
    from sagelib.records import provenance

    monkeypatch.setattr(provenance, "environment", lambda: {"gpus": None, "git_commit": "c0ffee"})
    made = []

    def factory(gpus):
        assert gpus == 2
        made.append(distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                             resources={"GPU": 1}, dashboard_address=None))
        return made[0]

    monkeypatch.setattr(distribute, "local_gpu_cluster", factory)
    return made


BENCH_ARGS = ["bench", "--device", "cpu", "--backends", "reference", "--shapes", "1:2:64:32,1:2:32:16",
              "--causal", "no,yes", "--reps", "2", "--warmup", "1", "--no-progress"]


def test_bench_gpus_prints_the_dashboard_and_writes_the_same_records(thread_cluster, tmp_path, capsys):
    assert cli.main([*BENCH_ARGS, "--out", str(tmp_path / "alone.json")]) == 0
    assert cli.main([*BENCH_ARGS, "--gpus", "2", "--out", str(tmp_path / "spread.json")]) == 0
    err = capsys.readouterr().err
    assert "dask: 2 GPU worker(s), dashboard http" in err
    alone, spread = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("alone", "spread"))
    assert content(spread) | {"command": None} == content(alone) | {"command": None}
    assert spread["placement"]["asked"] == "--gpus 2" and spread["placement"]["gpu_workers"] == 2
    assert set(spread) == set(alone) | {"placement"} and spread["environment"]["git_commit"] == "c0ffee"
    assert len(spread["records"]) == 4 and all(r["check"]["ok"] and r["stats"] for r in spread["records"])


def test_parity_gpus_gives_the_rows_of_the_in_process_run(thread_cluster, tmp_path):
    argv = ["parity-grid", "--device", "cpu", "--n-values", "5", "--head-dims", "32", "--seed", "7", "--no-progress"]
    assert cli.main([*argv, "--out", str(tmp_path / "alone.json")]) == 0
    assert cli.main([*argv, "--gpus", "2", "--out", str(tmp_path / "spread.json")]) == 0
    alone, spread = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("alone", "spread"))
    assert spread["rows"] == alone["rows"] and len(alone["rows"]) == 3
    assert [r["seed"] for r in alone["rows"]] == [7, 8, 9]


def test_a_cluster_without_gpu_workers_is_refused(monkeypatch):
    monkeypatch.setattr(distribute, "local_gpu_cluster", lambda gpus: distributed.LocalCluster(
        n_workers=1, processes=False, dashboard_address=None))
    with pytest.raises(UsageError, match="none of the cluster's workers offers the resource GPU.*--resources GPU=1"):
        with distribute.open_client(distribute.Placement(gpus=1)):
            pass


@pytest.mark.parametrize("argv, message", [
    (["bench", "--suite", "quant", "--gpus", "2"], "nothing to spread over GPUs"),
    (["sweep", "--build-only", "--gpus", "2"], "--build-only compiles here, on no GPU"),
    (["bench", "--gpus", "2", "--scheduler", "tcp://h:1"], "give one"),
    (["parity-grid", "--gpus", "x"], "--gpus: expected a whole number"),
])
def test_commands_refuse_placements_that_cannot_work(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


# ----------------------------------------------------------------- the sm90 sweep, one shape per task


def test_sweep_gpus_runs_each_shape_as_a_task_and_keeps_the_shapes_order(thread_cluster, monkeypatch, tmp_path, capsys):
    from sagelib.backends.kernels import sm90
    from sagelib.measure import bench, sweep_sm90

    def fake_shape(shape, settings, schedules):  # the rows sweep_shape yields, without a GPU
        for variant in ("default", "other"):
            row = {"shape": f"N{shape[2]}", "variant": variant, "ms": shape[2] / 1000}
            yield row, f"{row['shape']} {variant}"

    monkeypatch.setattr(sm90, "unavailable_reason", lambda: None)
    monkeypatch.setattr(sweep_sm90, "sweep_shape", fake_shape)
    monkeypatch.setattr(bench, "device_summary", lambda device: {"name": "fake"})
    out = tmp_path / "sweep.json"
    assert cli.main(["sweep", "--gpus", "2", "--shapes", "2:4:256:64,2:4:512:128,2:4:128:64:causal",
                     "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert [(r["shape"], r["variant"]) for r in document["rows"]] == [
        (f"N{n}", v) for n in (256, 512, 128) for v in ("default", "other")]
    assert document["device"] == {"name": "fake"}
    printed = capsys.readouterr().out
    assert all(f"N{n} default" in printed for n in (256, 512, 128))


# ----------------------------------------------------------------- packaging


def test_the_dask_extra_and_the_wheelhouse_option_carry_the_same_packages():
    import re
    import subprocess
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = lambda reqs: {Requirement(r).name.lower() for r in reqs}  # noqa: E731
    assert names(extras["dask"]) == {"distributed", "dask-cuda", "bokeh"}
    assert "distributed" in names(extras["test"])  # CI runs these tests
    done = subprocess.run(["bash", str(root / "scripts" / "build_wheelhouse.sh"), "--dask", "--dry-run",
                           "--python", "3.12"], capture_output=True, text=True, timeout=60, cwd=root)
    assert done.returncode == 0, done.stderr
    stack = re.search(r"would download: (.*)", done.stdout).group(1).split()
    assert names(stack) == names(["papermill", "nbclient", "nbformat", "ipykernel", "nbconvert", "jupytext"]) | names(
        extras["dask"])
    plain = subprocess.run(["bash", str(root / "scripts" / "build_wheelhouse.sh"), "--dry-run"], capture_output=True,
                           text=True, timeout=60, cwd=root)
    assert "distributed" not in plain.stdout and "papermill" in plain.stdout


# ----------------------------------------------------------------- on a GPU host (pytest -m gpu)


@pytest.mark.gpu
def test_bench_on_one_gpu_through_dask_records_what_the_in_process_run_does(tmp_path, capsys):
    """`sagelib bench --gpus 1` (a dask-cuda worker, or a plain one per GPU) against the same bench in process:
    the same cases, modes and output checks; the timings are the GPU's and are not compared here."""
    argv = ["bench", "--backends", "sdpa-flash,cuda", "--shapes", "2:8:2048:128,4:8:1024:64", "--causal", "no,yes",
            "--reps", "5", "--warmup", "2", "--ceilings", "skip", "--cooldown-s", "0", "--no-progress"]
    assert cli.main([*argv, "--out", str(tmp_path / "alone.json")]) == 0
    assert cli.main([*argv, "--gpus", "1", "--out", str(tmp_path / "spread.json")]) == 0
    assert "dask: 1 GPU worker(s), dashboard" in capsys.readouterr().err
    alone, spread = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("alone", "spread"))
    # synced and host rows time calls their end_to_end row checked: they carry no check of their own
    cases = lambda d: [(r["backend"], r["mode"], r["shape"], r["causal"], (r.get("check") or {}).get("ok"))  # noqa: E731
                       for r in d["records"]]
    assert cases(spread) == cases(alone) and not failed_records(alone) and not failed_records(spread)
    assert any(ok for *_, ok in cases(alone))
    assert spread["device"] == alone["device"] and spread["plan"] == alone["plan"]
    assert all(r["stats"]["median_ms"] > 0 for r in spread["records"])
