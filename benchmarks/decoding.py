"""Timing decoding: beam search and greedy, ours beside HF `generate()`, the same batch and length limits, and where
our beam search spends its time."""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any

import torch
from ablate.benchmarks.device import autocast, synchronize
from ablate.benchmarks.settings import BenchConfig, Setup
from ablate.benchmarks.timing import summarize
from ablate.data.tokenizer import BOS_ID, EOS_ID, PAD_ID
from ablate.lightning_modules.decoding import beam_search, greedy_search
from ablate.lightning_modules.static_decoding import static_beam_search


class DecodeClock:
    """Counts decoder steps (calls of the output projection) and, given the module each step starts with, the time
    spent inside the network."""

    def __init__(self, output_layer, device, step_start=None) -> None:
        self.steps, self.model_s, self.device, self._start = 0, 0.0, device, 0.0
        self.handles = [output_layer.register_forward_hook(self._end)]
        if step_start is not None:
            self.handles.append(step_start.register_forward_pre_hook(self._begin))

    def _begin(self, *args: Any) -> None:
        synchronize(self.device)
        self._start = time.perf_counter()

    def _end(self, *args: Any) -> None:
        self.steps += 1
        if self._start:
            synchronize(self.device)
            self.model_s += time.perf_counter() - self._start
            self._start = 0.0

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def beam_bookkeeping(model, src, bench: BenchConfig, s: Setup) -> dict[str, float]:
    """Share of our beam search's time spent outside the network (selection, finished set, cache reordering)."""
    run, device = s.run, s.device
    clock = DecodeClock(model.output, device, step_start=model.tgt_embed)
    encoder_end: list[float] = []
    enc = model.encoder_norm.register_forward_hook(lambda *args: encoder_end.append(time.perf_counter()))
    try:
        synchronize(device)
        start = time.perf_counter()
        beam_search(model, src, BOS_ID, EOS_ID, bench.beam_size, run.train.length_penalty, *_max_len(run))
        synchronize(device)
        total = time.perf_counter() - start
    finally:
        clock.close()
        enc.remove()
    encode = (encoder_end[0] if encoder_end else start) - start
    return {
        "total_s": total,
        "encode_s": encode,
        "decoder_s": clock.model_s,
        "bookkeeping_s": total - encode - clock.model_s,
        "bookkeeping_share": (total - encode - clock.model_s) / total,
        "steps": clock.steps,
    }


def _max_len(run) -> tuple[float, int]:
    return run.train.max_len_a, run.train.max_len_b


def _decoders(ours, hf, src, bench: BenchConfig, s: Setup, rows: dict) -> dict[str, tuple[Any, Any]]:
    """name -> (the layer each decoder step ends with, a call that decodes `src`): ours (dynamic and static beam,
    greedy), each row peer's, HF generate's."""
    alpha, (a, b), k = s.run.train.length_penalty, _max_len(s.run), bench.beam_size
    systems: dict[str, tuple[Any, Any]] = {
        "ours_beam": (ours.output, lambda: beam_search(ours, src, BOS_ID, EOS_ID, k, alpha, a, b)),
        # train.decoding 'static' (opt-in on CUDA until measured, one replayed graph a step there; decoder_steps counts
        # only the steps run eagerly, as a replayed graph calls no hook)
        "ours_beam_static": (ours.output, lambda: static_beam_search(ours, src, BOS_ID, EOS_ID, k, alpha, a, b)),
        "ours_greedy": (ours.output, lambda: greedy_search(ours, src, BOS_ID, EOS_ID, a, b)),
    }
    for name, model in rows.items():
        systems[f"{name}_beam"] = (model.output, lambda m=model: beam_search(m, src, BOS_ID, EOS_ID, k, alpha, a, b))
        systems[f"{name}_greedy"] = (model.output, lambda m=model: greedy_search(m, src, BOS_ID, EOS_ID, a, b))
    if hf is not None:
        systems["hf_beam"] = (
            hf.hf.lm_head,
            lambda: hf.generate(src, beam_size=k, alpha=alpha, max_len_a=a, max_len_b=b),
        )
        systems["hf_greedy"] = (
            hf.hf.lm_head,
            lambda: hf.generate(src, beam_size=1, alpha=alpha, max_len_a=a, max_len_b=b),
        )
    return systems


def run_decoding(ours, hf, src, bench: BenchConfig, s: Setup, rows: dict | None = None) -> dict[str, dict]:
    """Beam and greedy decoding of one source batch, ours, the row peers' (`rows`: name -> our model built from
    that row) and (if given) HF generate, interleaved."""
    device, precision = s.device, s.precision
    systems = _decoders(ours, hf, src, bench, s, rows or {})
    times: dict[str, list[float]] = {name: [] for name in systems}
    steps: dict[str, int] = {}
    lengths: dict[str, float] = {}
    names = list(systems)
    with contextlib.ExitStack() as stack:
        if bench.full_length:
            stack.enter_context(hold_back_eos([ours, *(rows or {}).values()], hf))
        for r in range(1 + bench.decode_repeats):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                layer, decode = systems[name]
                clock = DecodeClock(layer, device)
                synchronize(device)
                start = time.perf_counter()
                with torch.inference_mode(), autocast(device, precision):
                    out = decode()
                synchronize(device)
                elapsed = time.perf_counter() - start
                clock.close()
                if r == 0:
                    steps[name], lengths[name] = clock.steps, _mean_length(out)
                else:
                    times[name].append(elapsed)
    n = src.size(0)
    return {
        name: {
            "sentences_per_s": n / statistics.median(times[name]),
            "time_s": summarize(times[name]),
            "times_s": times[name],  # one per round; the systems take turns within a round: ratios pair them
            "decoder_steps": steps[name],
            "mean_output_tokens": lengths[name],
        }
        for name in systems
    }


@contextlib.contextmanager
def hold_back_eos(ours: list, hf=None):
    """Lower eos's logit by 1e4 in each of our models (a hook on the output layer) and in HF's (final_logits_bias),
    so every hypothesis runs to the length limit, where both searches force eos."""
    handles = [model.output.register_forward_hook(_without_eos) for model in ours]
    saved = None
    if hf is not None:
        saved = hf.hf.final_logits_bias.clone()
        hf.hf.final_logits_bias[..., EOS_ID] = -1e4
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        if hf is not None:
            hf.hf.final_logits_bias.copy_(saved)


def _without_eos(module, args, out):
    """The logits with eos's lowered by 1e4: written with a Python index (a fill on the device), never a tensor made
    from host values, which a captured CUDA graph step (static decoding) refuses."""
    out = out.clone()
    out[..., EOS_ID] = -1e4
    return out


def _mean_length(out) -> float:
    """Mean output length (tokens before eos, no bos/pad) of our lists or of HF's (B, L) tensor."""
    if not isinstance(out, list):
        rows = out.tolist()
        out = [
            [i for i in (row[: row.index(EOS_ID)] if EOS_ID in row else row) if i not in (PAD_ID, BOS_ID)]
            for row in rows
        ]
    return sum(len(row) for row in out) / max(1, len(out))


def decoding_figures(trainees: list, src, bench: BenchConfig, s: Setup):
    """Beam and greedy decoding speed of ours (and HF's, and the row peers'), and where our beam search spends its
    time."""
    for t in trainees:
        t.module.eval()
    ours = trainees[0].module
    hf = next((t.module for t in trainees if t.name == "hf"), None)
    rows = {t.name: t.module for t in trainees if t.name in s.rows}
    decoding = run_decoding(ours, hf, src, bench, s, rows)
    with torch.inference_mode(), autocast(s.device, s.precision), contextlib.ExitStack() as stack:
        if bench.full_length:
            stack.enter_context(hold_back_eos([ours]))
        return decoding, beam_bookkeeping(ours, src, bench, s)
