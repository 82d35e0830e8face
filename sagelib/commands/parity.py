"""The contract and our kernels against the real SageAttention2 (needs a GPU and the peer).

    sagelib parity --against sage2                     # the full grid, every configuration the GPU runs
    sagelib parity --against sage2 --quick --out F.json
    sagelib parity --against sage2 --config sage2-sm90

Each row: Q/K int8 bit-exact against the peer's own quantizers, V's e4m3 bytes that differ, the output's
relative L1 of the contract and of our kernel against the real one, and the lse's largest difference; then
a summary per configuration against the bars (sagelib.measure.peer_parity.BARS) and the hidden-key probe
on the real kernels. The document is written with --out (data/results is where recordings are kept).
Building the peer: docs/design/peers.md.
"""

from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser("parity", help="the contract and our kernels against the real SageAttention2",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", choices=("sage2",), required=True,
                        help="the peer to compare with (sage2: SageAttention2's CUDA kernels, built from source)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME",
                        help="a peer configuration (repeatable; default: every one this GPU runs): "
                             "sage2-sm90, sage2-sm89, sage2-sm89-per-warp-fp16")
    parser.add_argument("--quick", action="store_true", help="the first eight cases of the grid")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first case (case i uses seed + i)")
    parser.add_argument("--out", metavar="FILE", help="write the JSON document here")
    parser.set_defaults(func=run)


def run(args) -> int:
    from sagelib.backends import sage2
    from sagelib.errors import InputError, KernelUnavailable
    from sagelib.measure import peer_parity, recordings
    from sagelib.records import documents

    unknown = [c for c in args.config if c not in sage2.CONFIGS]
    if unknown:
        raise InputError(f"--config: expected some of {', '.join(sage2.CONFIGS)}, got {', '.join(unknown)}")
    configs, skipped = recordings.usable_backends(args.config or list(sage2.CONFIGS))
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    if not configs:
        raise KernelUnavailable("no SageAttention2 configuration runs on this machine (the reasons are above)")
    document = peer_parity.run_grid(peer_parity.default_grid(args.quick), configs, seed=args.seed)
    document["command"] = "sagelib parity " + " ".join(
        ["--against", args.against] + [f"--config {c}" for c in args.config] + (["--quick"] if args.quick else []))
    if args.out:  # the real kernels may give NaN (the mask probe records it): stored as null, counted here
        clean, nans = documents.finite_only(document)
        print(f"wrote {documents.write_json(clean, args.out)}" + (f" ({nans} NaN/inf values as null)" if nans else ""))
    print(peer_parity.format_summary(document))
    passed = all(s["contract_passed"] == s["cases"] and s["ours_passed"] == s["cases"]
                 for s in document["summary"].values())
    return 0 if passed else 1
