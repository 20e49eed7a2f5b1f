"""A first report scores each (sentence, hypothesis) of a study once (`scores.segment_statistics`): most sentences
recur across a study's systems. The statistics must stay exactly sacreBLEU's, system by system, serially and in
worker processes that each take a share of the sentences."""

from __future__ import annotations

import numpy as np
import pytest

REFS = ["the cat sat on a mat", "hello here", "a b c d e", "", "one two three ."]
SYSTEMS = [
    ["the cat sat on the mat", "hello there", "a b c d", "x", "one two three ."],
    ["the cat sat on the mat", "the cat sat on the mat", "a b c d", "", "one two three ."],  # index 1: index 0's text
    ["a cat", "hello here", "a b c d e", "x", "one two ."],
]


def _records(tmp_path, systems=SYSTEMS, refs=REFS):
    from ablate.ablations.results.record import Record

    (tmp_path / "refs.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    records = []
    for i, hyps in enumerate(systems):
        (tmp_path / f"h{i}.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        records.append(Record(row=f"r{i}", group="g", seed=0, metrics={}, hypotheses=tmp_path / f"h{i}.txt",
                              references=tmp_path / "refs.txt"))  # fmt: skip
    return records


def _alone(metric: str, hyps: list[str], refs: list[str]) -> np.ndarray:
    from sacrebleu.metrics import BLEU, CHRF

    scorer = BLEU() if metric == "bleu" else CHRF()
    return np.asarray(scorer._extract_corpus_statistics(hyps, [refs]), dtype=np.float64)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_a_sentence_seen_before_gets_the_statistics_sacrebleu_gives_it(tmp_path, monkeypatch, metric):
    """The same hypothesis at the same sentence is scored once; the same text at another sentence (another
    reference) is scored again. Every system's statistics equal sacreBLEU's for that system alone."""
    from ablate.ablations.results import scores

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    calls = []
    for record, hyps in zip(_records(tmp_path), SYSTEMS, strict=True):
        scorer = scores._scorer(metric, None, record.references, record.references.stat().st_mtime)
        compute = type(scorer)._compute_segment_statistics
        monkeypatch.setattr(scorer, "_compute_segment_statistics", lambda h, r, s=scorer, c=compute: (calls.append(h),
                            c(s, h, r))[1])  # fmt: skip
        got = scores.system_scores(record, metric)
        assert got is not None and np.array_equal(got.stats, _alone(metric, hyps, REFS))
    distinct = {(i, h) for hyps in SYSTEMS for i, h in enumerate(hyps)}
    assert len(calls) == len(distinct) < sum(map(len, SYSTEMS))
    scores.forget_segments()


def test_worker_processes_sharing_out_the_sentences_write_sacrebleus_statistics(tmp_path, monkeypatch):
    """The first report's path on several cores: each process scores one share of the sentences of every system;
    the cache then holds, for each system, sacreBLEU's statistics of that system alone."""
    from ablate.ablations.results import scores

    refs = [f"the cat {i} sat on a mat" for i in range(41)]  # not a multiple of the cores: uneven shares
    systems = [[f"the {'dog' if (i + j) % 3 else 'cat'} {j} sat on {'a' if j % (i + 2) else 'the'} mat"
                for j in range(41)] for i in range(5)]  # fmt: skip
    records = _records(tmp_path, systems, refs)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    said: list[str] = []
    scores.score_ahead(records, say=said.append, after_s=0.0)
    assert said[0] == "scoring the dev translations per sentence (BLEU, chrF): 10 not cached, on 3 cores"
    assert len(list((tmp_path / "cache" / "scores").iterdir())) == 10
    scores._corpus_stats.cache_clear()  # read back from the disk
    for record, hyps in zip(records, systems, strict=True):
        for metric in ("bleu", "chrf"):
            got = scores.system_scores(record, metric)
            assert got is not None and np.array_equal(got.stats, _alone(metric, hyps, refs)), (record.row, metric)
