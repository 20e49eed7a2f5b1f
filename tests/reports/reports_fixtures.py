"""Results directories built the way `ablate sweep` writes them: study.json, records, hyps/refs, an Optuna journal.

Hypotheses are made from the references by corrupting a fraction of the words (seeded), and every record's BLEU
is the real sacrebleu corpus BLEU of its hypotheses, so the records are consistent with what the report re-tests.
"""

from __future__ import annotations

import json
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


def split_overrides(overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    model = {k: v for k, v in overrides.items() if k in BASE_MODEL}
    train = {k: v for k, v in overrides.items() if k in BASE_TRAIN}
    return model, train


def row_config(overrides: dict[str, Any]) -> dict[str, dict[str, Any]]:
    model, train = split_overrides(overrides)
    return {"model": BASE_MODEL | model, "train": BASE_TRAIN | train, "data": dict(BASE_DATA)}


def params_of(model: dict[str, Any]) -> int:
    """A made-up but monotone parameter count (reports never compute it, they read it)."""
    d, h = model["d_model"], model["n_heads"]
    layer = 4 * d * h * model["d_k"] + 2 * d * model["d_ff"]
    return model["vocab_size"] * d + model["n_layers"] * 2 * layer


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


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
) -> dict[str, Any]:
    """Write records/<name>__seed<seed>.json (and its hypotheses); returns the record."""
    config = row_config(overrides)
    config["train"]["seed"] = seed
    record: dict[str, Any] = {
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
    if state == "complete":
        assert hyps is not None
        bleu = sacrebleu.corpus_bleu(hyps, [refs])
        hyp_rel = f"hyps/{name}__seed{seed}.txt"
        (out / hyp_rel).parent.mkdir(parents=True, exist_ok=True)
        (out / hyp_rel).write_text("\n".join(hyps) + "\n", encoding="utf-8")
        ppl = 2.0 + (100.0 - bleu.score) / 20.0
        steps = config["train"]["max_steps"]
        record["hypotheses"] = hyp_rel
        record["metrics"] = {
            "bleu": round(bleu.score, 4),
            "ppl": round(ppl, 4),
            "nll": 0.7,
            "loss": 1.1,
            "params": params_of(config["model"]),
            "steps": steps,
            "tokens_per_sec": 5000.0 + 100 * seed,
            "tgt_tokens_per_sec": 2500.0,
            "wall_time_s": wall_time_s + 10 * seed,
            "train_time_s": wall_time_s - 5,
            "device": device,
            "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        }
        n = 4
        record["curves"] = {
            "val": [
                {
                    "step": steps * (i + 1) // n,
                    "loss": 3.0 - i * 0.3,
                    "nll": 2.9 - i * 0.3,
                    "ppl": ppl * (1 + (n - 1 - i) * 0.5),
                    "bleu": bleu.score * (i + 1) / n,
                }
                for i in range(n)
            ],
            "train": [{"step": 10 * i, "loss": 5.0 - 0.1 * i, "lr": 1e-4 * i} for i in range(1, 10)],
        }
    elif state == "failed":
        record["metrics"] = {"steps": 37, "device": device}
    write_json(out / "records" / f"{name}__seed{seed}.json", record)
    return record


def make_study(
    out: Path,
    *,
    rows: list[tuple[str, str, dict[str, Any], float]] = TABLE3_ROWS,
    seeds: tuple[int, ...] = (0, 1),
    study: str = "table3",
    storage: str | None = "journal",
    plan: dict[tuple[str, int], str] | None = None,
    reasons: dict[tuple[str, int], str] | None = None,
) -> Path:
    """A results directory. `plan` gives (row, seed) -> 'complete' | 'failed' | 'running' | 'pending' (default
    complete); with storage='journal' an Optuna journal holds one trial per row x seed in that state."""
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or {}
    reasons = reasons or {}
    refs = references()
    (out / "refs").mkdir(exist_ok=True)
    (out / "refs" / "valid.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    storage_url = f"journal:{out / 'optuna.journal'}" if storage == "journal" else storage
    write_json(
        out / "study.json",
        {
            "study": study,
            "preset": "smoke",
            "seeds": list(seeds),
            "storage": storage_url,
            "optuna_study": f"{study}-smoke",
            "wandb_project": "ablate-test",
            "rows": [{"name": n, "group": g, "overrides": o, "config": row_config(o)} for n, g, o, _ in rows],
            "created_at": "2026-01-01T00:00:00+00:00",
        },
    )
    for name, group, overrides, rate in rows:
        for seed in seeds:
            state = plan.get((name, seed), "complete")
            if state in ("complete", "failed"):
                hyps = corrupt(refs, rate, seed=zlib.crc32(f"{name}@{seed}".encode())) if rate >= 0 else list(refs)
                make_record(
                    out,
                    name,
                    group,
                    overrides,
                    seed,
                    hyps=hyps,
                    refs=refs,
                    state=state,
                    study=study,
                    reason=reasons.get((name, seed)),
                )
    if storage == "journal":
        _make_journal(out / "optuna.journal", f"{study}-smoke", rows, seeds, plan, reasons)
    return out


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
