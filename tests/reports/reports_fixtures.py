"""Results directories built the way `ablate sweep` writes them: study.json, records, hyps/refs, an Optuna journal.

Hypotheses are made from the references by corrupting a fraction of the words (seeded), and every record's BLEU
is the real sacrebleu corpus BLEU of its hypotheses, so the records are consistent with what the report re-tests.
With `budgets`, every complete trial is also scored at shorter budgets (train.budgets), each with its own
hypotheses and per-sentence NLL, as a sweep writes them; with `source_ratios`, every score has the swapped-source
perplexity (`ppl_swapped`, `source_ppl_ratio`).
"""

from __future__ import annotations

import json
import math
import random
import zlib
from pathlib import Path
from typing import Any

import sacrebleu

BASE_MODEL: dict[str, Any] = {
    "vocab_size": 1000,
    "n_layers": 2,
    "d_model": 32,
    "d_ff": 64,
    "n_heads": 4,
    "d_k": 8,
    "d_v": 8,
    "p_drop": 0.1,
    "p_drop_attn": 0.1,
    "p_drop_relu": 0.1,
    "label_smoothing": 0.1,
    "norm": "post",
    "positions": "sinusoidal",
    "max_len": 128,
    "tie_embeddings": True,
    "scale_embeddings": True,
    "layer_norm_eps": 1e-6,
    "pad_id": 0,
}
BASE_TRAIN: dict[str, Any] = {
    "max_steps": 400,
    "warmup_steps": 100,
    "lr_factor": 1.0,
    "beam_size": 4,
    "length_penalty": 0.6,
    "seed": 0,
}
BASE_DATA: dict[str, Any] = {"corpus": "builtin", "vocab_size": 1000, "tokens_per_batch": 1024}

# name, group, model/train overrides, word-corruption rate of its hypotheses (lower = better BLEU)
TABLE3_ROWS: list[tuple[str, str, dict[str, Any], float]] = [
    ("base", "base", {}, 0.30),
    ("A1", "A", {"n_heads": 1, "d_k": 32, "d_v": 32}, 0.45),
    ("A3", "A", {"n_heads": 8, "d_k": 4, "d_v": 4}, 0.30),
    ("B1", "B", {"d_k": 4}, 0.36),
    ("C1", "C", {"n_layers": 1}, 0.60),
    ("D1", "D", {"p_drop": 0.0}, 0.31),
    ("E1", "E", {"positions": "learned"}, 0.30),
    ("big", "big", {"d_model": 64, "d_ff": 128, "n_heads": 8, "p_drop": 0.3, "max_steps": 800}, 0.10),
    ("F1", "F", {"norm": "pre"}, 0.28),
]

WORDS = (
    "the a house cat dog sees reads writes old new big small red green blue river tree city man woman child "
    "book letter quickly slowly today yesterday near under over with without and but because which who"
).split()


def references(n: int = 80, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))) + " ." for _ in range(n)]


def corrupt(refs: list[str], rate: float, seed: int) -> list[str]:
    """Each word replaced with probability `rate` (seeded): a system of a given quality."""
    rng = random.Random(seed)
    return [" ".join(w if rng.random() >= rate else rng.choice(WORDS) for w in line.split()) for line in refs]


MODERN_MODEL = ("norm_type", "activation", "bias", "n_kv_heads", "qk_norm")
"""Model fields of the modern components (`modern.yaml`) a row may override; BASE_MODEL leaves them at the paper's."""


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    model = {k: v for k, v in overrides.items() if k in BASE_MODEL or k in MODERN_MODEL}
    train = {k: v for k, v in overrides.items() if k in BASE_TRAIN}
    return model, train


def row_config(overrides: dict[str, Any], base_model: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """A row's resolved config; `base_model`: model fields of the study's base that differ from BASE_MODEL's (a study
    at another size)."""
    model, train = split_overrides(overrides)
    return {"model": BASE_MODEL | (base_model or {}) | model, "train": BASE_TRAIN | train, "data": dict(BASE_DATA)}


def params_of(model: dict[str, Any]) -> int:
    """A made-up but monotone parameter count (reports never compute it, they read it)."""
    d, h = model["d_model"], model["n_heads"]
    layer = 4 * d * h * model["d_k"] + 2 * d * model["d_ff"]
    return model["vocab_size"] * d + model["n_layers"] * 2 * layer


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


def write_scores(
    out: Path, key: str, hyps: list[str], refs: list[str], *, nll: bool = False, ratio: float | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Write hyps/<key>.txt (and, with `nll`, hyps/<key>.nll.tsv: per sentence summed NLL <tab> target tokens, summing
    to the PPL); returns the dev metrics (BLEU by sacrebleu, a PPL that falls as BLEU rises, the swapped-source PPL
    at `ratio` times it) and the record's paths to the files."""
    bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
    ppl = 2.0 + (100.0 - bleu) / 20.0
    paths = {"hypotheses": f"hyps/{key}.txt"}
    (out / "hyps").mkdir(parents=True, exist_ok=True)
    (out / paths["hypotheses"]).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    if nll:
        rng = random.Random(zlib.crc32(key.encode()))
        tokens = [len(r.split()) + 1 for r in refs]
        weights = [t * rng.uniform(0.5, 1.5) for t in tokens]
        scale = math.log(ppl) * sum(tokens) / sum(weights)
        paths["sentence_nll"] = f"hyps/{key}.nll.tsv"
        lines = [f"{w * scale:.6f}\t{t}" for w, t in zip(weights, tokens, strict=True)]
        (out / paths["sentence_nll"]).write_text("\n".join(lines) + "\n", encoding="utf-8")
    metrics = {
        "bleu": round(bleu, 4),
        "ppl": round(ppl, 4),
        "nll": round(math.log(ppl), 4),
        "bleu_signature": SIGNATURE,
    }
    if ratio is not None:
        metrics |= {"ppl_swapped": round(ppl * ratio, 4), "source_ppl_ratio": ratio}
    return metrics, paths


def make_record(
    out: Path,
    name: str,
    group: str,
    overrides: dict[str, Any],
    seed: int,
    *,
    hyps: list[str] | None,
    refs: list[str],
    state: str = "complete",
    reason: str | None = None,
    study: str = "table3",
    wall_time_s: float = 60.0,
    device: str = "cpu",
    budgets: dict[float, list[str]] | None = None,
    ratios: dict[float, float] | None = None,
    base_model: dict[str, Any] | None = None,
    preset: str = "smoke",
) -> dict[str, Any]:
    """Write records/<name>__seed<seed>.json (and its hypotheses); returns the record. `budgets`: fraction -> the
    hypotheses of that shorter budget (then every score also gets its per-sentence NLL); `ratios`: fraction (1.0 for
    T) -> source_ppl_ratio (default 18) of each score, or None for records without one; `base_model`, as in
    `row_config`; `preset`: the record's preset."""
    config = row_config(overrides, base_model)
    config["train"]["seed"] = seed
    record = _skeleton(name, group, overrides, seed, config, state=state, reason=reason, study=study)
    record["preset"] = preset
    if state == "complete":
        assert hyps is not None
        steps = config["train"]["max_steps"]

        def ratio(fraction: float) -> float | None:
            return ratios.get(fraction, 18.0) if ratios is not None else None

        metrics, paths = write_scores(out, f"{name}__seed{seed}", hyps, refs, nll=bool(budgets), ratio=ratio(1.0))
        record.update(paths)
        record["metrics"] = metrics | {
            "loss": 1.1,
            "params": params_of(config["model"]),
            "steps": steps,
            "tokens_per_sec": 5000.0 + 100 * seed,
            "tgt_tokens_per_sec": 2500.0,
            "wall_time_s": wall_time_s + 10 * seed,
            "train_time_s": wall_time_s - 5,
            "device": device,
        }
        if budgets:
            record["budgets"] = [
                _budget(out, f"{name}__seed{seed}", fraction, round(steps * fraction), short, refs, ratio(fraction))
                for fraction, short in sorted(budgets.items())
            ]
        record["curves"] = _curves(steps, metrics["ppl"], metrics["bleu"])
    elif state == "failed":
        record["metrics"] = {"steps": 37, "device": device}
    write_json(out / "records" / f"{name}__seed{seed}.json", record)
    return record


def _skeleton(
    name: str,
    group: str,
    overrides: dict[str, Any],
    seed: int,
    config: dict,
    *,
    state: str,
    reason: str | None,
    study: str,
) -> dict[str, Any]:
    """A record's fields before its scores: the trial, its config, the references, and where it ran."""
    return {
        "study": study,
        "preset": "smoke",
        "row": name,
        "group": group,
        "seed": seed,
        "state": state,
        "reason": reason,
        "overrides": overrides,
        "config": config,
        "metrics": {},
        "curves": {"val": [], "train": []},
        "hypotheses": None,
        "references": "refs/valid.txt",
        "optuna": {"trial_number": 0},
        "wandb": None,
        "host": "testhost",
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
    }


def _curves(steps: int, ppl: float, bleu: float, n: int = 4) -> dict[str, list[dict[str, Any]]]:
    """Validation curves that still rise at the end (BLEU grows linearly to its final value), and a training curve."""
    return {
        "val": [
            {
                "step": steps * (i + 1) // n,
                "loss": 3.0 - i * 0.3,
                "nll": 2.9 - i * 0.3,
                "ppl": ppl * (1 + (n - 1 - i) * 0.5),
                "bleu": bleu * (i + 1) / n,
            }
            for i in range(n)
        ],
        "train": [{"step": 10 * i, "loss": 5.0 - 0.1 * i, "lr": 1e-4 * i} for i in range(1, 10)],
    }


def _budget(out: Path, key: str, fraction: float, steps: int, hyps, refs, ratio: float | None) -> dict[str, Any]:
    """One entry of a record's 'budgets', its files written as a sweep writes a budget's."""
    metrics, paths = write_scores(out, f"{key}.b{steps}", hyps, refs, nll=True, ratio=ratio)
    return {"fraction": fraction, "steps": steps, "metrics": metrics | {"steps": steps}, **paths}


def make_study(
    out: Path,
    *,
    rows: list[tuple[str, str, dict[str, Any], float]] = TABLE3_ROWS,
    seeds: tuple[int, ...] = (0, 1),
    study: str = "table3",
    storage: str | None = "journal",
    plan: dict[tuple[str, int], str] | None = None,
    reasons: dict[tuple[str, int], str] | None = None,
    budgets: dict[float, dict[str, float]] | None = None,
    ratios: dict[tuple[str, float], float] | None = None,
    seed_rates: dict[tuple[str, int], float] | None = None,
    meta: dict[str, Any] | None = None,
    base_model: dict[str, Any] | None = None,
    preset: str = "smoke",
) -> Path:
    """A results directory. `plan` gives (row, seed) -> 'complete' | 'failed' | 'running' | 'pending' (default
    complete); with storage='journal' an Optuna journal holds one trial per row x seed in that state.

    `budgets`: shorter budget (fraction of T) -> row -> the corruption rate of its hypotheses there (a row not named:
    its rate at T + 0.05). `ratios`: (row, fraction) -> source_ppl_ratio (unnamed: 18), None: records without one.
    `seed_rates`: (row, seed) -> the rate at T of that seed instead of the row's. `meta`: more study.json fields.
    `base_model`: model fields every row starts from instead of BASE_MODEL's (a rung of another size: its records'
    `params` follow); `preset`: the preset study.json and the records name."""
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or {}
    reasons, budgets, seed_rates = reasons or {}, budgets or {}, seed_rates or {}
    refs = references()
    (out / "refs").mkdir(exist_ok=True)
    (out / "refs" / "valid.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    storage_url = f"journal:{out / 'optuna.journal'}" if storage == "journal" else storage
    write_json(
        out / "study.json",
        {
            "study": study,
            "preset": preset,
            "seeds": list(seeds),
            "storage": storage_url,
            "optuna_study": f"{study}-{preset}",
            "wandb_project": "ablate-test",
            "rows": [
                {"name": n, "group": g, "overrides": o, "config": row_config(o, base_model)} for n, g, o, _ in rows
            ],
            "created_at": "2026-01-01T00:00:00+00:00",
            **(meta or {}),
        },
    )
    for name, group, overrides, rate in rows:
        for seed in seeds:
            state = plan.get((name, seed), "complete")
            if state in ("complete", "failed"):
                hyps = _hyps(refs, seed_rates.get((name, seed), rate), f"{name}@{seed}")
                shorter = {f: _hyps(refs, r.get(name, rate + 0.05), f"{name}@{seed}@{f}") for f, r in budgets.items()}
                mine = {f: r for (row, f), r in ratios.items() if row == name} if ratios is not None else None
                make_record(out, name, group, overrides, seed, hyps=hyps, refs=refs, state=state, study=study,
                            reason=reasons.get((name, seed)), budgets=shorter, ratios=mine, base_model=base_model,
                            preset=preset)  # fmt: skip
    if storage == "journal":
        _make_journal(out / "optuna.journal", f"{study}-{preset}", rows, seeds, plan, reasons)
    return out


def _hyps(refs: list[str], rate: float, key: str) -> list[str]:
    """Hypotheses at corruption `rate`, seeded by `key`; a negative rate: the references themselves."""
    return corrupt(refs, rate, seed=zlib.crc32(key.encode())) if rate >= 0 else list(refs)


def _make_journal(path, study_name, rows, seeds, plan, reasons) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    study = optuna.create_study(study_name=study_name, storage=storage)
    keys = [(name, seed, group) for name, group, _, _ in rows for seed in seeds]
    # Optuna hands out enqueued trials oldest first: enqueue the ones to start before those left waiting.
    keys.sort(key=lambda k: plan.get((k[0], k[1]), "complete") == "pending")
    for name, seed, group in keys:
        study.enqueue_trial({}, user_attrs={"row": name, "seed": seed, "group": group})
    started = [k for k in keys if plan.get((k[0], k[1]), "complete") != "pending"]
    for _ in started:
        trial = study.ask()
        key = (trial.user_attrs["row"], trial.user_attrs["seed"])
        state = plan.get(key, "complete")
        assert state != "pending", "pending trials must stay enqueued"
        if state == "complete":
            study.tell(trial, 1.0)
        elif state == "failed":
            trial.set_user_attr("reason", reasons.get(key, "failed"))
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        # 'running': asked and never told, as while a worker trains it
