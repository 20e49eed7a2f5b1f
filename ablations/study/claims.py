"""Claims as data: a claims file (ablations/study/builtin/table3.claims.yaml, or a user's) read and checked.

A claims file lists claims; each claim is one or more comparisons of a row against a reference row (the base by
default) on one metric, with the direction the claim expects (`higher`, `lower`), an equivalence margin (`same`), or a
non-inferiority margin (`no_worse`: not worse than the reference by more than the margin, better by any amount).
The types are the statistics' (`ablations.statistics.claims`); studies carry their claims (`ablations.study.definition`)
into study.json, and `ablations.statistics.verdicts` judges them on the results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from ablate.ablations.statistics.claims import EXPECTS, MARGINED, Claim, Comparison
from ablate.data.errors import AblateError
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
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise AblateError(f"{path}:{where} not valid YAML: fix the file") from None
    return parse_claims(raw, str(path), rows, base)


def parse_claims(raw: Any, source: str, rows: list[str] | None = None, base: str | None = None) -> list[Claim]:
    """Claims from parsed YAML (`{claims: [...]}` or the list itself). With `rows`, every row named must exist."""
    items = raw.get("claims") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise AblateError(
            f"{source}: expected 'claims:' with a list of claims (see ablations/study/builtin/table3.claims.yaml)"
        )
    claims, seen = [], set()
    for i, item in enumerate(items):
        where = f"{source}: claim {i + 1}"
        if not isinstance(item, dict):
            raise AblateError(f"{where}: expected a mapping with id, text and compare")
        if unknown := sorted(set(item) - CLAIM_KEYS):
            raise AblateError(f"{where}: unknown key '{unknown[0]}'; a claim has {', '.join(sorted(CLAIM_KEYS))}")
        claim_id = str(item.get("id") or f"claim-{i + 1}")
        where = f"{source}: claim '{claim_id}'"
        if claim_id in seen:
            raise AblateError(f"{where}: the id is used twice; give each claim its own id")
        seen.add(claim_id)
        compare = item.get("compare")
        if not isinstance(compare, list) or not compare:
            raise AblateError(f"{where}: 'compare' must be a non-empty list of {{row, metric, expect}}")
        claims.append(
            Claim(
                id=claim_id,
                text=str(item.get("text") or claim_id),
                section=str(item.get("section") or ""),
                compare=tuple(
                    _comparison(c, f"{where}, comparison {j + 1}", rows, base) for j, c in enumerate(compare)
                ),
            )
        )
    return claims


def _comparison(raw: Any, where: str, rows: list[str] | None, base: str | None) -> Comparison:
    if not isinstance(raw, dict):
        raise AblateError(f"{where}: expected a mapping like {{row: A1, metric: bleu, expect: lower}}")
    if unknown := sorted(set(raw) - COMPARE_KEYS):
        raise AblateError(f"{where}: unknown key '{unknown[0]}'; use {', '.join(sorted(COMPARE_KEYS))}")
    metric, expect = str(raw.get("metric", "")).lower(), raw.get("expect")
    if metric not in METRICS:
        raise AblateError(f"{where}: unknown metric '{raw.get('metric')}'; choose one of {', '.join(METRICS)}")
    if expect not in EXPECTS:
        raise AblateError(f"{where}: expect must be one of {', '.join(EXPECTS)}, got {expect!r}")
    margin = raw.get("margin")
    if expect in MARGINED and not (isinstance(margin, int | float) and margin > 0):
        raise AblateError(f"{where}: expect: {expect} needs a positive 'margin' in {metric} units, e.g. margin: 1.0")
    if expect not in MARGINED and margin is not None:
        raise AblateError(f"{where}: 'margin' only applies to expect: same or no_worse")
    against = raw.get("against")
    if against is None and rows is not None and base is None:
        raise AblateError(f"{where}: the study has no base row: name the reference row with 'against'")
    for name in (raw.get("row"), against):
        if name is None and name is against:
            continue
        if not isinstance(name, str) or (rows is not None and name not in rows):
            known = ", ".join(rows or [])
            raise AblateError(f"{where}: unknown row {name!r}; the study's rows are {known}")
    return Comparison(
        row=raw["row"],
        metric=metric,
        expect=expect,
        against=against if against != base else None,
        margin=float(margin) if margin is not None else None,
    )


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
