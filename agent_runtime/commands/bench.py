"""`agent-runtime bench ...`: benchmarks that print ratios measured side by side in one run."""

from __future__ import annotations

import argparse
import json
import sys

from agent_runtime.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    kv = sub.add_parser("kv", help="KV blocks and views: view vs contiguous, drop vs recompute, N streams vs 1")
    kv.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    kv.add_argument("--model", help="model path (default: the embedded SmolLM2-135M-Instruct)")
    kv.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    kv.add_argument("--threads", type=int, help="torch threads (default: the cores actually free)")
    kv.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    kv.add_argument("--repeats", type=int, default=15, help="timed repeats per measurement (default 15)")


def _run_kv(args) -> int:
    import torch

    from agent_runtime.benchmarks.kv_bench import KVBench
    from agent_runtime.benchmarks.measure import machine_info, print_header
    from agent_runtime.model_loader import load_model, set_threads

    if args.repeats < 3:
        raise UserError(f"--repeats must be at least 3 (got {args.repeats})")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available here; use --device cpu")
    threads = set_threads(args.threads)
    loaded = load_model(args.model, dtype=args.dtype, tokenizer=False)
    loaded.model.to(args.device)
    info = machine_info(loaded.model_id, threads, clock="wall", device=args.device)
    print_header(info)
    backend = "triton" if args.device == "cuda" else "torch"
    result = KVBench(loaded, repeats=args.repeats, device=args.device, backend=backend).run()
    result["machine"] = info
    if args.json:
        print(json.dumps(result))
    else:
        print(f"(a) view of 8 blocks vs contiguous (transformers cache): {result['view_vs_contiguous']:.3f}x step time "
              f"({result['view8_step_ms']:.1f} vs {result['contiguous_step_ms']:.1f} ms; vs 1 block {result['view8_vs_view1']:.3f}x)")
        print(f"(b) drop a middle block vs recompute {result['suffix_tokens']} tokens: {result['drop_vs_recompute']:.0f}x cheaper "
              f"({result['drop_us']:.1f} us vs {result['recompute_ms']:.0f} ms)")
        for n in (2, 4, 8):
            print(f"(c) {n} streams vs 1: {result[f'streams{n}_vs_1']:.2f}x aggregate tokens/s "
                  f"({result[f'tokens_per_s_{n}']:.1f} vs {result['tokens_per_s_1']:.1f})")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.bench == "kv":
        return _run_kv(args)
    raise UserError(f"unknown benchmark {args.bench!r}")
