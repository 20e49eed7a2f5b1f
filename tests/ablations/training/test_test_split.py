"""The test split, scored once training has finished: real sweeps (one process, DDP over two CPU processes, and one
SIGKILLed during its test decoding, then resumed) whose records hold test BLEU and chrF equal to sacreBLEU's scores
of the hypotheses they wrote against refs/test.txt; the hypotheses are what the final weights (averaged ones with
train.average_last) decode; a run that died in its final validation resumes at its last step and is scored too.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import sacrebleu

STUDY_ROWS, STUDY_DDP = "sweep_rows.yaml", "sweep_ddp.yaml"
# A row whose test decoding takes seconds: an untrained model's beam search runs to the length limit on 1500
# sentences, long enough to kill the worker in the middle of it.
SLOW_TEST_STUDY = """\
name: sweep-slow-test
description: "ablate sweep tests: a worker killed during its test decoding"
scale: none
preset: smoke
seeds: 1
base:
  model: {n_layers: 1, d_model: 16, d_ff: 32, n_heads: 2}
  hardware: {accelerator: cpu}
  tracking: {log_every: 2}
rows:
  - name: t1
    train: {max_steps: 10, warmup_steps: 5, val_every: 10, val_max_sentences: 20, beam_size: 4}
    data: {builtin_train: 1500, builtin_valid: 40, builtin_test: 1500, vocab_size: 300, builtin_lexicon: 0.1,
           builtin_max_words: 20}
"""


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def assert_scores_match_files(out: Path, record: dict) -> tuple[list[str], list[str]]:
    """The record's test scores are sacreBLEU's of the files it names; returns (hypotheses, references)."""
    metrics = record["metrics"]
    assert record["test_hypotheses"] == f"hyps/{record['row']}__seed{record['seed']}.test.txt"
    assert record["test_references"] == "refs/test.txt"
    hyps, refs = lines(out / record["test_hypotheses"]), lines(out / record["test_references"])
    assert len(hyps) == len(refs) == metrics["test_sentences"] > 0
    bleu = sacrebleu.metrics.BLEU()
    assert metrics["test_bleu"] == pytest.approx(bleu.corpus_score(hyps, [refs]).score, abs=1e-9)
    assert metrics["test_bleu_signature"] == str(bleu.get_signature())
    assert metrics["test_bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    chrf = sacrebleu.metrics.CHRF()
    assert metrics["test_chrf"] == pytest.approx(chrf.corpus_score(hyps, [refs]).score, abs=1e-9)
    assert metrics["test_chrf_signature"] == str(chrf.get_signature())
    return hyps, refs


def assert_wandb_summary_has_test_scores(sweeps, trial_dir: Path, record: dict) -> None:
    """The trial's one offline W&B run (read with wandb's own records) finished with the test scores in its summary."""
    from ablate.reports.wandb_log import read_offline_run

    (run_dir,) = sweeps.wandb_runs(trial_dir)
    run = read_offline_run(run_dir)
    assert run["finished"]
    for key in ("test_bleu", "test_chrf", "test_sentences"):
        assert run["summary"][f"final/{key}"] == pytest.approx(record["metrics"][key]), key


def decode_test_split(checkpoint: Path, data: dict, cache: str, monkeypatch) -> list[str]:
    """The test split decoded here, in one process, by the weights of `checkpoint` (test order)."""
    from ablate.data.config import DataConfig
    from ablate.data.datamodule import TranslationDataModule
    from ablate.lightning_modules.module import TranslationModule

    monkeypatch.setenv("ABLATE_CACHE", cache)
    datamodule = TranslationDataModule(DataConfig(**data))
    module = TranslationModule.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True).eval()
    hyps: dict[int, str] = {}
    for batch in datamodule.test_dataloader():
        texts = datamodule.tokenizer.decode(module.translate(batch["src"]))
        hyps.update(zip(batch["index"].tolist(), texts, strict=True))
    return [hyps[i] for i in range(len(hyps))]


def test_a_finished_sweep_records_the_test_scores_of_the_files_it_wrote(finished_sweep, sweeps, monkeypatch):
    from ablate.ablations.study.definition import load_study
    from ablate.data.prepare import prepare

    out = finished_sweep
    records = sweeps.records(out)
    study = load_study(sweeps.study(STUDY_ROWS))
    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    for row in ("ok1", "ok2"):
        record = records[f"{row}__seed0"]
        assert record["state"] == "complete", record["reason"]
        _, refs = assert_scores_match_files(out, record)
        # The test split's references, not the dev set's.
        expected = prepare(study.run_config(study.row(row), "smoke").data).references("test")
        assert refs == expected and refs != lines(out / "refs" / "valid.txt")
        assert_wandb_summary_has_test_scores(sweeps, out / "trials" / f"{row}__seed0", record)
    diverged = records["nan__seed0"]
    assert diverged["state"] == "failed" and "test_bleu" not in diverged["metrics"]
    assert "test_hypotheses" not in diverged and not (out / "hyps" / "nan__seed0.test.txt").exists()


@pytest.mark.slow
def test_under_ddp_the_test_hypotheses_are_the_final_weights_decoding_in_test_order(sweeps, tmp_path, monkeypatch):
    out = tmp_path / "out"
    ddp = ["--hardware.devices", "2", "--hardware.strategy", "ddp_spawn", "--hardware.accelerator", "cpu"]
    done = sweeps.run(STUDY_DDP, out, *ddp, "--train.keep_checkpoints", "last", "--train.beam_size", "4")
    assert done.returncode == 0, done.stderr[-3000:]
    record = sweeps.records(out)["d1__seed0"]
    assert record["state"] == "complete" and record["metrics"]["device"].endswith("x2"), record["reason"]
    hyps, _ = assert_scores_match_files(out, record)
    assert len(set(hyps)) > 1  # sentences of their own, not one string everywhere
    # Each rank decoded half of the batches; gathered, they are in test order and are what the final weights say.
    checkpoint = out / "trials" / "d1__seed0" / "checkpoints" / "last.ckpt"
    assert decode_test_split(checkpoint, record["config"]["data"], sweeps.env["ABLATE_CACHE"], monkeypatch) == hyps
    # The spawned ranks of fit and of test attach to the main process's W&B run: one run, finished, test scores in.
    assert_wandb_summary_has_test_scores(sweeps, out / "trials" / "d1__seed0", record)


@pytest.mark.slow
def test_a_worker_killed_during_its_test_decoding_gets_the_test_score_on_the_rerun(sweeps, tmp_path):
    study = tmp_path / "slow_test.yaml"
    study.write_text(SLOW_TEST_STUDY, encoding="utf-8")
    out, log = tmp_path / "out", tmp_path / "killed.log"
    result = out / "trials" / "t1__seed0" / "result.json"
    proc = sweeps.start(study, out, log=log)
    try:  # result.json is written when training ends, just before the test decoding starts
        sweeps.wait_for(lambda: result.exists() or proc.poll() is not None, timeout=240)
    finally:
        sweeps.kill(proc)
    assert result.exists(), log.read_text(encoding="utf-8", errors="replace")[-3000:]
    killed = json.loads(result.read_text(encoding="utf-8"))
    assert "test_bleu" not in killed["metrics"], "killed after the test decoding"
    assert not (out / "records" / "t1__seed0.json").exists()

    rerun = sweeps.run(study, out)

    assert rerun.returncode == 0, rerun.stderr[-3000:]
    record = sweeps.records(out)["t1__seed0"]
    assert record["state"] == "complete", record["reason"]
    # Training and its final validation had finished: their result stands as it was (a session that validated again
    # would have measured no throughput), and only the test split was decoded.
    assert record["curves"] == killed["curves"] and [p["step"] for p in record["curves"]["val"]] == [10]
    assert killed["metrics"]["tokens_per_sec"] > 0
    for key in ("bleu", "ppl", "steps", "tokens_per_sec", "train_time_s"):
        assert record["metrics"][key] == killed["metrics"][key], key
    assert record["metrics"]["resumed_at_steps"] == [10]
    assert record["metrics"]["wall_time_s"] > killed["metrics"]["wall_time_s"] + record["metrics"]["test_time_s"]
    assert record["metrics"]["test_sentences"] == len(lines(out / "refs" / "test.txt")) > 1000
    assert_scores_match_files(out, record)


def test_a_run_that_died_in_its_final_validation_validates_at_its_last_step_then_decodes_the_test(
    sweeps, tmp_path, monkeypatch
):
    from ablate.ablations.study.definition import load_study
    from ablate.ablations.training.train import train

    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    monkeypatch.setenv("WANDB_MODE", "disabled")
    study = load_study(sweeps.study(STUDY_ROWS))
    run = study.run_config(study.row("ok1"), "smoke", train={"keep_checkpoints": "last", "test_eval": False})
    first = train(run, tmp_path / "run")
    assert "test_bleu" not in first.metrics and not first.test_hypotheses
    # On disk as a process that died in the final validation leaves it: last.ckpt at max_steps, no result.json, no
    # model.pt (written when the fit ends).
    (tmp_path / "run" / "result.json").unlink()
    (tmp_path / "run" / "model.pt").unlink()
    resumed = train(study.run_config(study.row("ok1"), "smoke", train={"keep_checkpoints": "last"}), tmp_path / "run")

    assert resumed.metrics["steps"] == first.metrics["steps"] == 10 and resumed.metrics["resumed_at_steps"] == [10]
    assert resumed.curves["val"] == first.curves["val"] and resumed.curves["val"][-1]["step"] == 10  # no point at 0
    assert resumed.hypotheses == first.hypotheses and resumed.metrics["bleu"] == first.metrics["bleu"]
    bleu = sacrebleu.metrics.BLEU()
    assert resumed.metrics["test_bleu"] == bleu.corpus_score(resumed.test_hypotheses, [resumed.test_references]).score
    assert len(resumed.test_hypotheses) == resumed.metrics["test_sentences"] == 40
    assert (tmp_path / "run" / "model.pt").is_file(), "the resumed run keeps its final weights too"


def test_with_checkpoint_averaging_the_test_split_is_decoded_by_the_averaged_weights(sweeps, tmp_path, monkeypatch):
    from ablate.ablations.study.definition import load_study
    from ablate.ablations.training.train import train

    monkeypatch.setenv("WANDB_MODE", "disabled")
    study = load_study(sweeps.study(STUDY_ROWS))
    train_cfg = {"val_every": 5, "average_last": 2, "beam_size": 4, "keep_checkpoints": "last"}
    run = study.run_config(study.row("ok1"), "smoke", train=train_cfg)
    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    result = train(run, tmp_path / "run")
    # last.ckpt holds the weights the final validation scored: the average of steps 5 and 10 (CheckpointAveraging).
    checkpoint = tmp_path / "run" / "checkpoints" / "last.ckpt"
    decoded = decode_test_split(checkpoint, asdict(run.data), sweeps.env["ABLATE_CACHE"], monkeypatch)
    assert decoded == result.test_hypotheses and len(set(decoded)) > 1
    assert result.metrics["test_bleu"] == sacrebleu.metrics.BLEU().corpus_score(decoded, [result.test_references]).score


def test_ablate_translate_decodes_with_a_trials_final_weights_what_its_record_holds(
    finished_sweep, sweeps, tmp_path, monkeypatch, capsys
):
    """Every finished trial keeps its final weights with its tokenizer and decoding (model.pt, kept when the
    checkpoints go): `ablate translate OUT --row R` on the test split's sources gives the record's test hypotheses
    and, with --refs, its test BLEU and chrF with their signatures."""
    from ablate.ablations import cli
    from ablate.ablations.study.definition import load_study
    from ablate.data.prepare import prepare

    out = finished_sweep
    record = sweeps.records(out)["ok1__seed0"]
    model = out / "trials" / "ok1__seed0" / "model.pt"
    assert model.is_file() and not (out / "trials" / "ok1__seed0" / "checkpoints" / "last.ckpt").exists()
    assert not (out / "trials" / "nan__seed0" / "model.pt").exists(), "a diverged trial leaves no model"
    monkeypatch.setenv("ABLATE_CACHE", sweeps.env["ABLATE_CACHE"])
    study = load_study(sweeps.study(STUDY_ROWS))
    sources = tmp_path / "test.src"
    sources.write_text("\n".join(prepare(study.run_config(study.row("ok1"), "smoke").data).sources("test")) + "\n")
    refs = out / record["test_references"]

    assert cli.main(["translate", str(out), "--row", "ok1", "--input", str(sources), "--refs", str(refs)]) == 0
    printed = capsys.readouterr()
    assert printed.out.splitlines() == lines(out / record["test_hypotheses"])
    assert f"BLEU {record['metrics']['test_bleu']:.2f}  chrF {record['metrics']['test_chrf']:.2f}" in printed.err
    assert record["metrics"]["test_bleu_signature"] in printed.err

    # The model file alone, on another machine's path, and one sentence from standard input.
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(sources.read_text().splitlines()[0] + "\n"))
    assert cli.main(["translate", str(model), "--beam", "1"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1

    # Bad input: one line, exit 2.
    for args, said in (
        ([str(out)], "is a sweep: choose a model with --row and --seed (trained: ok1__seed0, ok2__seed0)"),
        ([str(out), "--row", "nan"], "no trained model for row nan seed 0"),
        ([str(tmp_path / "nowhere")], "no such file or folder"),
        ([str(sources)], "not a model file of ablate"),
        ([str(model), "--input", str(sources), "--refs", str(tmp_path / "missing.txt")], "--refs"),
    ):
        assert cli.main(["translate", *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err, err
