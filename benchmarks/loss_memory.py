"""Peak memory of the training loss at the paper's vocabulary on this machine: the pre-softmax projection and the
label-smoothed loss, forward and backward, through the logits (`label_smoothed_nll`) and fused
(`FusedLinearLabelSmoothedNLL`, train.fused_loss), each in a fresh process so one's freed memory cannot hide the
other's. The paper base's sizes (d_model 512, V 37000, the tied embedding matrix) at a small batch of target tokens.

    python -m ablate.benchmarks.loss_memory [--tokens 4000] [--dtype float32|bfloat16]

CPU: peak resident memory (VmHWM, reset before the step) above the resident memory before it; CUDA:
torch.cuda.max_memory_allocated above what was allocated before. Prints one JSON line per path and their ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import torch
from ablate.benchmarks.timing import _proc_status, _reset_peak_rss
from ablate.lightning_modules.kernels import FusedLinearLabelSmoothedNLL
from ablate.lightning_modules.module import label_smoothed_nll

MODEL = {"d_model": 512, "vocab": 37000}


def measure(fused: bool, tokens: int, dtype: str, device: str) -> dict:
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(MODEL["vocab"], MODEL["d_model"], device=device) * 0.04)
    x = torch.randn(tokens, MODEL["d_model"], device=device, requires_grad=True)
    target = torch.randint(4, MODEL["vocab"], (tokens,), device=device)
    autocast = torch.autocast(device, dtype=getattr(torch, dtype), enabled=dtype != "float32")

    def step() -> float:
        with autocast:
            if fused:
                total = FusedLinearLabelSmoothedNLL.apply(x, weight, target, 0.1, 0)[0]
            else:
                total = label_smoothed_nll(x @ weight.t(), target, 0.1, 0)[0].sum()
        total.backward()
        return float(total)

    step()  # gradients exist from here on, as in training after the first step
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = _status_bytes("VmRSS")
        _reset_peak_rss()
    start = time.perf_counter()
    loss = step()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() - before if device == "cuda" else _status_bytes("VmHWM") - before
    return {"path": "fused" if fused else "logits", "tokens": tokens, "dtype": dtype, "device": device,
            "peak_above_start_mb": round(peak / 2**20, 1), "step_s": round(seconds, 3), "loss": loss}  # fmt: skip


def _status_bytes(key: str) -> int:
    """A memory figure of this process in bytes (`timing._proc_status`); the CPU measurement needs Linux's."""
    value = _proc_status(key)
    if value is None:
        raise RuntimeError(f"/proc/self/status has no {key}: the CPU measurement runs on Linux only")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ablate.benchmarks.loss_memory", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--tokens", type=int, default=4000, help="target tokens in the batch (default 4000)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--one", choices=["logits", "fused"], help=argparse.SUPPRESS)  # the child's path
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one == "fused", args.tokens, args.dtype, args.device)))
        return 0
    results = []
    for path in ("logits", "fused"):
        cmd = [sys.executable, "-m", "ablate.benchmarks.loss_memory", "--one", path, "--tokens", str(args.tokens),
               "--dtype", args.dtype, "--device", args.device]  # fmt: skip
        line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        results.append(json.loads(line))
        print(line)
    ratio = results[0]["peak_above_start_mb"] / max(results[1]["peak_above_start_mb"], 1e-9)
    print(json.dumps({"logits_over_fused_peak": round(ratio, 2),
                      "loss_difference": abs(results[0]["loss"] - results[1]["loss"])}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
