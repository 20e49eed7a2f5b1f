"""The bootstrap scores 1000 replicates of every system at once (`scores.bleu_scores`, `scores.chrf_scores`,
`stats.SystemScores.scores_of`). Each replicate must be the score sacreBLEU itself gives those sums, smoothing, brevity
penalty and empty orders included; otherwise every interval and mark of a report moves."""

from __future__ import annotations

import numpy as np
import pytest

REFS = ["the cat sat on a mat .", "hello here", "a b c d e", "", "one two three .", "x y", "so it goes , again"]
HYPS = ["the cat sat on the mat", "hello there", "a b c d", "x", "one two three .", "", "so it goes again ."]


def _segments(metric):
    return np.asarray(metric._extract_corpus_statistics(HYPS, [REFS]), dtype=np.float64)


def _edge_rows(width: int, rng) -> np.ndarray:
    """Sums sacreBLEU branches on: nothing at all, no matches, no n-grams past some order, an empty system, a system
    shorter and longer than the references, and random counts."""
    rows = [np.zeros(width)]
    for _ in range(200):
        row = rng.integers(0, 30, size=width).astype(np.float64)
        if rng.random() < 0.3:
            row[rng.integers(0, width) :] = 0
        rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize(
    "options",
    [{}, {"smooth_method": "none"}, {"smooth_method": "floor"}, {"smooth_method": "add-k"}, {"effective_order": True},
     {"smooth_method": "floor", "smooth_value": 0.3, "effective_order": True}],
)  # fmt: skip
def test_bleu_of_many_sums_is_sacrebleus_bleu_of_each(options):
    from ablate.ablations.results.scores import bleu_scores
    from ablate.ablations.statistics.significance import resample_weights
    from sacrebleu.metrics import BLEU

    metric = BLEU(**options)
    segments = _segments(metric)
    rows = np.vstack(
        [resample_weights(len(HYPS), 300) @ segments, _edge_rows(segments.shape[1], np.random.default_rng(0))]
    )
    many = bleu_scores(metric)
    assert many is not None
    expected = np.array([metric._compute_score_from_stats(row.tolist()).score for row in rows])
    np.testing.assert_allclose(many(rows), expected, rtol=1e-12, atol=1e-12)
    assert len(set(np.round(expected, 6))) > 20  # the rows are not all one case


@pytest.mark.parametrize("options", [{}, {"word_order": 2}, {"eps_smoothing": True}, {"beta": 1}])
def test_chrf_of_many_sums_is_sacrebleus_chrf_of_each(options):
    from ablate.ablations.results.scores import chrf_scores
    from ablate.ablations.statistics.significance import resample_weights
    from sacrebleu.metrics import CHRF

    metric = CHRF(**options)
    segments = _segments(metric)
    rows = np.vstack(
        [resample_weights(len(HYPS), 300) @ segments, _edge_rows(segments.shape[1], np.random.default_rng(1))]
    )
    expected = np.array([metric._compute_score_from_stats(row.tolist()).score for row in rows])
    np.testing.assert_allclose(chrf_scores(metric)(rows), expected, rtol=1e-12, atol=1e-12)


def test_a_reports_replicates_are_the_same_through_either_path(tmp_path, monkeypatch):
    """A system read from files (`system_scores`) bootstraps to the same replicates whether the batch scorer or
    sacreBLEU row by row computes them, for BLEU, chrF and perplexity."""
    from ablate.ablations.results import scores
    from ablate.ablations.results.record import Record
    from ablate.ablations.statistics.significance import bootstrap_scores, resample_weights

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "refs.txt").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    (tmp_path / "hyps.txt").write_text("\n".join(HYPS) + "\n", encoding="utf-8")
    (tmp_path / "nll.txt").write_text("".join(f"{3.5 * i + 0.25}\t{i + 1}\n" for i in range(len(HYPS))))
    record = Record(row="r", group="r", seed=0, metrics={"ppl": 9.0}, hypotheses=tmp_path / "hyps.txt",
                    references=tmp_path / "refs.txt", sentence_nll=tmp_path / "nll.txt")  # fmt: skip
    weights = resample_weights(len(HYPS), 200)
    for metric in ("bleu", "chrf", "ppl"):
        system = scores.system_scores(record, metric)
        assert system is not None and system.scores_of is not None and system.stats is not None
        fast = bootstrap_scores(system, weights)
        slow = np.array([system.scorer(row) for row in weights @ system.stats])
        np.testing.assert_allclose(fast, slow, rtol=1e-12)
        assert np.ptp(slow) > 0


def test_the_resampled_weights_count_each_draw_once():
    """The counts of each replicate sum to the number of sentences, and equal a count of the same draws."""
    from ablate.ablations.statistics.significance import BOOTSTRAP_SEED, resample_weights

    weights = resample_weights(50, 40)
    idx = np.random.default_rng(BOOTSTRAP_SEED).integers(0, 50, size=(40, 50))
    assert np.array_equal(weights, np.stack([np.bincount(row, minlength=50) for row in idx]).astype(float))
    assert not weights.flags.writeable


def test_all_systems_at_once_are_each_system_alone():
    """`bootstrap_all` sums every system in one product (counts in float32 where that is exact): each system's
    replicates are exactly what it gets alone; counts too large for float32 and non-integer statistics too."""
    from ablate.ablations.statistics.significance import SystemScores, bootstrap_all, bootstrap_scores, resample_weights

    rng = np.random.default_rng(3)
    n = 400
    weights = resample_weights(n, 100)
    systems = [
        SystemScores(score=1.0, stats=rng.integers(0, 40, size=(n, 10)).astype(float), scorer=lambda s: s[2] / s[7]),
        SystemScores(score=1.0, stats=rng.integers(0, 2**20, size=(n, 3)).astype(float), scorer=lambda s: s[0] / s[1]),
        SystemScores(
            score=1.0,
            stats=rng.random((n, 2)) * 7,
            scorer=lambda s: s[0] / s[1],
            scores_of=lambda sums: sums[:, 0] / sums[:, 1],
        ),  # fmt: skip
        SystemScores(score=1.0, stats=rng.random((n + 1, 2)), scorer=lambda s: s[0]),  # another dev set: left out
    ]
    together = bootstrap_all(systems, weights)
    assert set(together) == {id(s) for s in systems[:3]}
    for system in systems[:2]:  # counts: exact
        assert np.array_equal(together[id(system)], bootstrap_scores(system, weights))
    np.testing.assert_allclose(together[id(systems[2])], bootstrap_scores(systems[2], weights), rtol=1e-12)
