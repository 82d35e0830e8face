"""Every parity case of our kernels against the contract, on one GPU or spread over several.

    sagelib parity-grid                                  # the cuda kernel on notebook 03's grid
    sagelib parity-grid --backends cuda,cuda-sm90,cuda-sm90-k64 --out parity.json
    sagelib parity-grid --backends cuda-sm90 --gpus all  # each case a task on one GPU of this host
    sagelib parity-grid --device cpu --n-values 17       # the contract columns alone (a functional run)

The grid is sagelib.measure.parity.default_sweep (lengths, head_dim, dtype, layout, GQA, causal alignment,
granularity, accumulation) through each backend; case i draws its inputs from seed --seed + i, so a grid run
twice, or spread over GPUs, checks the same inputs. --out writes a sagelib.parity-grid/1 document.
(`sagelib parity --against sage2` is the other parity: the contract and our kernels against the real peer.)
Exit status: 0 when every case that ran passed, 1 when one failed, 2 for bad input, 3 without the GPU a
backend needs.
"""

from __future__ import annotations

import shlex
import sys

from sagelib.errors import KernelUnavailable, UsageError


def register(subparsers) -> None:
    from sagelib.measure import distribute

    parser = subparsers.add_parser("parity-grid", help="our kernels against the contract on the parity grid, "
                                                       "optionally one case per GPU", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="cuda", metavar="A,B",
                        help="kernels to check: cuda, cuda-sm90, cuda-sm90-k64 (default cuda)")
    parser.add_argument("--n-values", default="1,17,1000,4099", metavar="N,..",
                        help="sequence lengths of the grid (default 1,17,1000,4099: notebook 03's gpu profile)")
    parser.add_argument("--head-dims", default="64,128", metavar="D,..", help="head dims (default 64,128)")
    parser.add_argument("--seed", type=int, default=0, help="case i draws from seed + i (default 0)")
    parser.add_argument("--device", default="cuda", metavar="cuda|cpu",
                        help="cuda (default); cpu runs the contract columns alone and says why the kernel's are empty")
    parser.add_argument("--out", metavar="FILE.json", help="write the rows as a sagelib.parity-grid/1 document")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    distribute.add_arguments(parser, "(backend, case)")
    parser.set_defaults(func=main)


def _numbers(flag: str, text: str) -> tuple[int, ...]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() and int(t) > 0 for t in items):
        raise UsageError(f"{flag}: expected comma-separated positive whole numbers, got {text!r}; e.g. {flag} 17,1000")
    return tuple(int(t) for t in items)


def main(args) -> int:
    import functools

    from sagelib.commands.args import output_file
    from sagelib.measure import distribute, parity

    where = distribute.placement(args.gpus, args.scheduler)
    backends = list(dict.fromkeys(b.strip() for b in args.backends.split(",") if b.strip()))
    unknown = [b for b in backends if b not in parity.KERNEL_PRESETS]
    if not backends or unknown:
        raise UsageError(f"--backends: expected names from {list(parity.KERNEL_PRESETS)}, got {args.backends!r}")
    if args.device not in ("cuda", "cpu"):
        raise UsageError(f"--device: expected cuda or cpu, got {args.device!r}")
    n_values, head_dims = _numbers("--n-values", args.n_values), _numbers("--head-dims", args.head_dims)
    out = output_file("--out", args.out) if args.out else None
    if args.device == "cuda" and (where is None or where.gpus):  # --scheduler: the workers' GPUs, not this host's
        for backend in backends:
            reason = parity.kernel_unavailable_reason(args.device, backend)
            if reason:
                raise KernelUnavailable(f"--backends: {backend!r} cannot run here: {reason}; --device cpu runs "
                                        "the contract columns alone")
    tasks = parity.grid_cases(backends, n_values, head_dims, args.seed)
    run = functools.partial(parity.grid_row, device=args.device)
    if where is None:
        from tqdm import tqdm

        rows = [run(task) for task in tqdm(tasks, desc="parity", unit="case", disable=args.no_progress,
                                           file=sys.stderr)]
        device = _device_summary(args.device)
    else:
        with distribute.open_client(where) as client:
            head = distribute.submit_first(client, _device_summary, args.device)
            rows = distribute.map_cases(client, run, tasks, name="parity", progress=not args.no_progress,
                                        cost=lambda task: task[0].n_q * task[0].n_kv * task[0].head_dim)
            device = head.result()
    return _report(rows, device, out, args)


def _device_summary(device: str) -> dict:
    import torch

    from sagelib.measure.bench import device_summary

    return device_summary(torch.device(device))


def _report(rows: list[dict], device: dict, out, args) -> int:
    from sagelib.records import documents
    from sagelib.records.datafile import utc_stamp

    ran = [r for r in rows if r.get("kernel") == "run"]
    failed = [r for r in ran if not r["passed"]]
    for r in rows:
        was_run = r.get("kernel") == "run"
        verdict = ("passed" if r["passed"] else "FAILED") if was_run else f"not run ({r.get('reason')})"
        to_contract = f" to_contract {r['to_contract']:.2e}" if was_run else ""
        print(f"{r['backend']:<14} {r['label']:<64} seed {r['seed']:<6} {verdict}{to_contract}")
    print(f"sagelib parity-grid: {len(ran) - len(failed)}/{len(ran)} run case(s) passed, {len(rows) - len(ran)} not run")
    if out:
        given = sys.argv[2:] if sys.argv[1:2] == ["parity-grid"] else []
        document, _ = documents.finite_only({
            "schema": documents.PARITY_GRID.id, "created_utc": utc_stamp(), "device": device,
            "command": " ".join(["sagelib parity-grid", *map(shlex.quote, given)]), "rows": rows})
        documents.write_json(document, out)
        print(f"sagelib parity-grid: wrote {out}")
    return 1 if failed else 0
