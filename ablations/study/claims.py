"""Claims as data: a claims file (ablations/study/builtin/table3.claims.yaml, or a user's) read and checked.

A claims file lists claims; each claim is one or more comparisons of a row against a reference row (the base by
default) on one metric, with the direction the claim expects (`higher`, `lower`), an equivalence margin (`same`), or a
non-inferiority margin (`no_worse`: not worse than the reference by more than the margin, better by any amount).
The types are the statistics' (`ablations.statistics.claims`); studies carry their claims (`ablations.study.definition`)
into study.json, and `ablations.statistics.verdicts` judges them on the results.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from ablate.ablations.statistics.claims import EXPECTS, MARGINED, Claim, Comparison
from ablate.data.errors import AblateError, not_utf8
from ablate.lightning_modules.metrics import METRICS

CLAIM_KEYS = {"id", "text", "section", "compare"}
COMPARE_KEYS = {"row", "metric", "expect", "against", "margin"}


def load_claims(path: str | Path, rows: list[str] | None = None, base: str | None = None) -> list[Claim]:
    """Read and check a claims file; AblateError naming the file and claim on any problem."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AblateError(f"{path}: no such claims file") from None
    except IsADirectoryError:
        raise AblateError(f"{path}: is a folder: give the claims file itself (e.g. my.claims.yaml)") from None
    except UnicodeDecodeError as err:
        raise AblateError(not_utf8(path, err.object, err.start)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise AblateError(f"{path}:{where} not valid YAML: fix the file") from None
    return parse_claims(raw, str(path), rows, base)


def parse_claims(raw: Any, source: str, rows: list[str] | None = None, base: str | None = None) -> list[Claim]:
    """Claims from parsed YAML (`{claims: [...]}` or the list itself). With `rows` (a study's), every claim must be
    testable in that study: its rows exist, no row is compared with itself, no claim compares a pair twice on one
    metric, and the study has a base row, which the verdicts need (`ablations.results.evidence`: a study without one
    judges no claim). Without `rows` (the claims a study.json carries, checked when its sweep began) only the form is
    checked, so a study run before a rule was added still reports."""
    items = raw.get("claims") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise AblateError(
            f"{source}: expected 'claims:' with a list of claims (see ablations/study/builtin/table3.claims.yaml)"
        )
    if rows is not None and base is None:
        raise AblateError(
            f"{source}: the study has no base row, and claims are judged only in a study with one: mark the row the "
            "others are compared with 'group: base'"
        )
    claims: list[Claim] = []
    for i, item in enumerate(items):
        claim = _claim(item, i, source, rows, base)
        if any(c.id == claim.id for c in claims):
            raise AblateError(f"{source}: claim '{claim.id}': the id is used twice; give each claim its own id")
        claims.append(claim)
    return claims


def _claim(item: Any, i: int, source: str, rows: list[str] | None, base: str | None) -> Claim:
    """The `i`th claim of `source`, each comparison checked, and (with `rows`) no pair compared twice on a metric."""
    where = f"{source}: claim {i + 1}"
    if not isinstance(item, dict):
        raise AblateError(f"{where}: expected a mapping with id, text and compare")
    if unknown := sorted(set(item) - CLAIM_KEYS):
        raise AblateError(f"{where}: unknown key '{unknown[0]}'; a claim has {', '.join(sorted(CLAIM_KEYS))}")
    claim_id = str(item.get("id") or f"claim-{i + 1}")
    where = f"{source}: claim '{claim_id}'"
    compare = item.get("compare")
    if not isinstance(compare, list) or not compare:
        raise AblateError(f"{where}: 'compare' must be a non-empty list of {{row, metric, expect}}")
    comparisons = tuple(_comparison(c, f"{where}, comparison {j + 1}", rows, base) for j, c in enumerate(compare))
    seen: dict[tuple[frozenset[str | None], str], tuple[int, str]] = {}
    for j, comp in enumerate(comparisons if rows is not None else (), start=1):
        key = (frozenset((comp.row, comp.against or base)), comp.metric)
        if key in seen:
            raise AblateError(
                f"{where}: comparisons {seen[key][0]} and {j} both compare {comp.row!r} with "
                f"{comp.against or base!r} on {comp.metric} (expect {seen[key][1]}, then {comp.expect}): a claim "
                "tests a pair once on each metric; keep one of them"
            )
        seen[key] = (j, comp.expect)
    return Claim(id=claim_id, text=str(item.get("text") or claim_id), section=str(item.get("section") or ""),
                 compare=comparisons)  # fmt: skip


def _comparison(raw: Any, where: str, rows: list[str] | None, base: str | None) -> Comparison:
    if not isinstance(raw, dict):
        raise AblateError(f"{where}: expected a mapping like {{row: A1, metric: bleu, expect: lower}}")
    if unknown := sorted(set(raw) - COMPARE_KEYS):
        raise AblateError(f"{where}: unknown key '{unknown[0]}'; use {', '.join(sorted(COMPARE_KEYS))}")
    metric, expect, margin = _expectation(raw, where)
    row, against = _pair(raw, where, rows, base)
    return Comparison(row=row, metric=metric, expect=expect, against=against, margin=margin)


def _expectation(raw: dict[str, Any], where: str) -> tuple[str, Any, float | None]:
    """The comparison's metric, expect and margin, checked: a margin (positive and finite) exactly where the kind
    of comparison is judged against one."""
    metric, expect = str(raw.get("metric", "")).lower(), raw.get("expect")
    if metric not in METRICS:
        raise AblateError(f"{where}: unknown metric '{raw.get('metric')}'; choose one of {', '.join(METRICS)}")
    if expect not in EXPECTS:
        raise AblateError(f"{where}: expect must be one of {', '.join(EXPECTS)}, got {expect!r}")
    margin = raw.get("margin")
    positive = isinstance(margin, int | float) and not isinstance(margin, bool) and 0 < margin < math.inf
    if expect in MARGINED and not positive:
        raise AblateError(
            f"{where}: expect: {expect} needs a positive 'margin' in {metric} units, e.g. margin: 1.0"
            + (f" (got {margin!r})" if margin is not None else "")
        )
    if expect not in MARGINED and margin is not None:
        raise AblateError(f"{where}: 'margin' only applies to expect: same or no_worse")
    return metric, expect, float(margin) if margin is not None else None


def _pair(raw: dict[str, Any], where: str, rows: list[str] | None, base: str | None) -> tuple[str, str | None]:
    """The comparison's row and reference row (None: the base); with `rows`, both rows of the study and not one row."""
    row, against = raw.get("row"), raw.get("against")
    if row is None:
        raise AblateError(f"{where}: no 'row': name the row the comparison tests, e.g. row: A1")
    for name in (row, against):
        if name is None:
            continue
        if not isinstance(name, str) or (rows is not None and name not in rows):
            known = ", ".join(rows or [])
            raise AblateError(f"{where}: unknown row {name!r}; the study's rows are {known}")
    reference = against if against is not None else base
    if rows is not None and reference == row:
        if against is None:
            raise AblateError(
                f"{where}: compares the base {row!r} with itself (a comparison without 'against' is made against the "
                "base): name the reference row with 'against'"
            )
        raise AblateError(
            f"{where}: compares row {row!r} with itself, which can never be tested: name another row in 'against'"
        )
    return row, (against if against != base else None)


def claims_to_data(claims: list[Claim]) -> list[dict[str, Any]]:
    """Claims as plain data (what study.json stores, so reports need no claims file)."""
    return [
        {
            "id": c.id,
            "text": c.text,
            "section": c.section,
            "compare": [{k: v for k, v in vars(x).items() if v is not None} for x in c.compare],
        }
        for c in claims
    ]
