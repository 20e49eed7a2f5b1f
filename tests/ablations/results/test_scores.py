"""The reports' scoring (`ablations.results.scores`): a study's references preprocessed once for every system, each
system's sentence statistics kept on disk by the texts' contents, and scoring ahead of the table with progress. The
statistics must stay what sacreBLEU gives each system alone."""

from __future__ import annotations

import pytest


def test_systems_sharing_a_reference_file_each_score_as_sacrebleu_scores_them_alone(tmp_path):
    """The reports preprocess a study's references once and score every system against that copy: each system's
    per-sentence statistics and corpus score must stay what sacreBLEU gives it with the references passed in."""
    import numpy as np
    from ablate.ablations.results.record import Record
    from ablate.ablations.results.scores import system_scores
    from sacrebleu.metrics import BLEU, CHRF

    refs = ["the cat sat on a mat", "hello here", "a b c d e", ""]
    systems = [["the cat sat on the mat", "hello there", "a b c d", "x"], ["a cat", "hello here", "", "y z"]]
    (tmp_path / "refs.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    for i, hyps in enumerate(systems):
        (tmp_path / f"h{i}.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        record = Record(row=f"r{i}", group="g", seed=0, metrics={}, hypotheses=tmp_path / f"h{i}.txt",
                        references=tmp_path / "refs.txt")  # fmt: skip
        for metric, alone in (("bleu", BLEU()), ("chrf", CHRF())):
            scores = system_scores(record, metric)
            expected = np.asarray(alone._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)
            assert np.array_equal(scores.stats, expected), (i, metric)
            assert scores.score == pytest.approx(alone.corpus_score(hyps, [refs]).score), (i, metric)


def test_sentence_statistics_are_kept_on_disk_by_content_and_never_read_for_other_text(tmp_path, monkeypatch):
    """A report run again reads each system's statistics from $ABLATE_CACHE/scores; an entry is named by the texts'
    contents, so a rewritten hypotheses file is scored afresh, and a torn entry is scored again and replaced."""
    from ablate.ablations.results import scores as metrics
    from ablate.ablations.results.record import Record
    from sacrebleu.metrics import BLEU

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    refs, hyp = tmp_path / "refs.txt", tmp_path / "hyp.txt"
    refs.write_text("the cat sat on a mat\nhello here\n", encoding="utf-8")
    record = Record(row="r", group="g", seed=0, metrics={}, hypotheses=hyp, references=refs)

    def score(text: str) -> float:
        hyp.write_text(text, encoding="utf-8")
        metrics._corpus_stats.cache_clear()  # a new process: only the disk remembers
        return metrics.system_scores(record, "bleu").score

    first = score("the cat sat on the mat\nhello there\n")
    (entry,) = (tmp_path / "cache" / "scores").iterdir()
    assert score("the cat sat on the mat\nhello there\n") == first  # read back
    other = "a cat\nhello here\n"
    assert score(other) == BLEU().corpus_score(other.splitlines(), [refs.read_text().splitlines()]).score != first
    entry.write_bytes(b"torn")
    assert score("the cat sat on the mat\nhello there\n") == first
    assert len(list((tmp_path / "cache" / "scores").iterdir())) == 2


def test_scoring_ahead_says_how_far_it_is_and_leaves_every_system_scored(tmp_path, monkeypatch):
    from ablate.ablations.results import scores as metrics
    from ablate.ablations.results.record import Record

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "refs.txt").write_text("the cat sat on a mat\nhello here\n", encoding="utf-8")
    records = []
    for i, text in enumerate(["the cat sat on the mat\nhello there\n", "a cat\nhello\n"]):
        (tmp_path / f"h{i}.txt").write_text(text, encoding="utf-8")
        records.append(Record(row=f"r{i}", group="g", seed=0, metrics={}, hypotheses=tmp_path / f"h{i}.txt",
                              references=tmp_path / "refs.txt"))  # fmt: skip
    records.append(Record(row="untranslated", group="g", seed=0, metrics={"bleu": 1.0}))  # no hypotheses: skipped
    lines: list[str] = []
    metrics.score_ahead(records, say=lines.append, after_s=0.0)

    assert lines[-1].startswith("scoring the dev translations per sentence (BLEU, chrF): 4/4, done in")
    assert len(list((tmp_path / "cache" / "scores").iterdir())) == 4  # each system's BLEU and chrF, kept


def test_systems_not_cached_are_scored_in_worker_processes_to_the_same_statistics(tmp_path, monkeypatch):
    """A first report of a study scores its systems on every core (each worker process writes its statistics to the
    cache): the same per-sentence statistics as scoring them one by one in this process."""
    import numpy as np
    from ablate.ablations.results import scores as metrics
    from ablate.ablations.results.record import Record

    (tmp_path / "refs.txt").write_text("".join(f"the cat {i} sat on a mat\n" for i in range(50)), encoding="utf-8")
    records = []
    for i in range(4):
        hyps = "".join(f"the {'dog' if (i + j) % 3 else 'cat'} {j} sat {i} on the mat\n" for j in range(50))
        (tmp_path / f"h{i}.txt").write_text(hyps, encoding="utf-8")
        records.append(Record(row=f"r{i}", group="g", seed=0, metrics={}, hypotheses=tmp_path / f"h{i}.txt",
                              references=tmp_path / "refs.txt"))  # fmt: skip
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)  # two cores, whatever this has
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "parallel"))
    said: list[str] = []
    metrics.score_ahead(records, say=said.append, after_s=0.0)
    assert said[0] == "scoring the dev translations per sentence (BLEU, chrF): 8 not cached, on 2 cores"
    assert len(list((tmp_path / "parallel" / "scores").iterdir())) == 8  # written by the workers
    metrics._corpus_stats.cache_clear()  # read back from the disk, not from this process's memory
    parallel = [metrics.system_scores(r, m) for r in records for m in ("bleu", "chrf")]
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "serial"))
    metrics._corpus_stats.cache_clear()
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0}, raising=False)
    metrics.score_ahead(records)
    serial = [metrics.system_scores(r, m) for r in records for m in ("bleu", "chrf")]
    for a, b in zip(parallel, serial, strict=True):
        assert a is not None and b is not None and a.score == b.score
        np.testing.assert_array_equal(a.stats, b.stats)
