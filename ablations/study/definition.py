"""Studies are data: a base, named rows of overrides, seeds, and an optional search space, loaded from YAML.

A row never subclasses anything: its config is `replace(base, **overrides)` section by section. The whole study is
validated (unknown fields, bad values, duplicate rows, scaling) before anything runs, so a typo in row 17 does not
surface after 16 finished trainings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from ablate.ablations.statistics.claims import Claim
from ablate.ablations.statistics.sequential import dunnett
from ablate.ablations.study.claims import load_claims, parse_claims
from ablate.ablations.study.config import SECTIONS, RunConfig, build_run_config, check_sections
from ablate.ablations.study.presets import PRESETS, Preset, get_preset
from ablate.data.errors import AblateError, did_you_mean, not_utf8

BUILTIN_DIR = Path(__file__).parent / "builtin"
STUDY_KEYS = {
    "name", "description", "scale", "seeds", "control_seeds", "base", "preset", "rows", "search_space",
    "tune_objective", "claims", "allocation", "min_seeds", "max_seeds", "recipes", "recipe",
}  # fmt: skip
ALLOCATIONS = ("fixed", "sequential")
"""How a sweep spends seeds: every row its `seeds` (fixed), or seeds only where a comparison is still open
(sequential: `reports.sequential`)."""
TUNE_OBJECTIVES = ("bleu", "ppl", "both")
"""What `ablate tune` optimises: dev BLEU, dev PPL, or both (a Pareto front, from which the compromise is picked)."""
ROW_KEYS = {"name", "group", "paper", "recipe", *SECTIONS}
PRESET_RECIPE = "preset"
"""The recipe name that means the preset's own training settings (calibrated on the paper's base)."""


@dataclass(frozen=True)
class Row:
    """One line of the study's table: a name, the group it is shown in, and its overrides of the base."""

    name: str
    """The row's name in the table, the report and the trial's files (`A1`, `big`)."""
    group: str
    """The table's group the row is shown in ('base' for the base row); default: the row's name."""
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)  # {"model": {...}, "train": {...}, ...}
    """The row's changes to the base, by config section: in the file, `model: {d_k: 16}` and the like on the row
    itself (any of model, train, data, hardware, tracking)."""
    paper: dict[str, float] = field(default_factory=dict)  # reference results to show beside ours (ppl, bleu, ...)
    """The published numbers shown beside ours, by metric (`{bleu: 25.8, ppl: 4.92}`)."""
    recipe: str | None = None
    """The study's recipe this row trains with (`Study.recipes`); None: the study's default (`Study.recipe`)."""

    def flat_overrides(self) -> dict[str, Any]:
        """Overrides as {"d_k": 16} (model fields bare, others as "train.max_steps") for tables and tags."""
        return {
            (k if s == "model" else f"{s}.{k}"): v for s, values in self.overrides.items() for k, v in values.items()
        }


@dataclass(frozen=True)
class SearchDim:
    """One hyperparameter of `ablate tune`: a float or int range (optionally log-scaled) or a list of choices."""

    name: str  # "train.lr_factor"
    """The field searched, as SECTION.FIELD (`train.lr_factor`): the key of its entry under `search_space:`."""
    low: float | None = None
    """The range's lower end (float and int)."""
    high: float | None = None
    """The range's upper end (float and int)."""
    log: bool = False
    """Sample the range on a log scale."""
    type: str = "float"  # "float" | "int" | "categorical"
    """'float', 'int' or 'categorical' (a list of `choices`)."""
    choices: tuple[Any, ...] = ()
    """The values of a categorical dimension."""

    @property
    def bounds(self) -> tuple[float, float]:
        """(low, high) of a float or int range (a list of choices has none)."""
        if self.low is None or self.high is None:
            raise ValueError(f"{self.name}: a {self.type} dimension has no range")
        return self.low, self.high


@dataclass(frozen=True)
class Study:
    """A named set of rows run against one base, each with several seeds."""

    name: str
    """The study's name (default: the file's stem): the sweep's output is runs/<name>-<preset>."""
    description: str
    """One paragraph on what the study asks, shown at the top of its report."""
    scale: str  # "paper": overrides are in the paper's units and shrunk by the preset; "none": used as written
    """'paper': the base and the rows are in the paper's units and every preset shrinks them keeping their ratios;
    'none': they are used as written."""
    seeds: int
    """Seeds per row (fixed allocation); the preset's own, if more, wins."""
    base: dict[str, dict[str, Any]]
    """The base configuration every row overrides, by section (`model: {...}`, `train: {...}`)."""
    rows: tuple[Row, ...]
    """The table's rows, in order: one `{name, group, paper, recipe, model: {...}, ...}` mapping each."""
    search_space: tuple[SearchDim, ...] = ()
    """`ablate tune`'s search space. In a `scale: paper` study its ranges are in the paper's units and every preset
    maps them to its own (`Preset.search_factor`), like the rows."""
    tune_objective: str = "bleu"
    """What `ablate tune` optimises (`TUNE_OBJECTIVES`); `--objective` on the command line overrides it."""
    default_preset: str | None = None
    """`preset:` in the file: the preset a sweep of the study runs when none is given (default: tiny)."""
    source: str = ""
    """The file the study was read from (set when it is read, not written in it)."""
    claims: tuple[Claim, ...] = ()
    """The claims the report gives a verdict on (`claims:` in the YAML: a file next to the study, or a list)."""
    control_seeds: int | Literal["auto"] = "auto"
    """Seeds of each control row: the base, which every row is compared with, and any row a claim compares others
    against (`against:`). 'auto': about sqrt(k) times a row's seeds for a control compared with k rows, the
    allocation that minimises the variance of k comparisons with one control for a fixed number of trials (Dunnett,
    1955, "A multiple comparison procedure for comparing several treatments with a control", JASA 50:
    n_control / n_row = sqrt(k)). An integer sets it outright for every control (at least the rows' seeds)."""
    allocation: Literal["fixed", "sequential"] = "fixed"
    """'fixed': every row trains `seeds`. 'sequential': every row starts at `min_seeds`, and a row gets one more seed
    only while one of its comparisons is open (not yet decided, and with a conditional power of deciding it by
    `max_seeds` of at least `FUTILITY`); `ablations.statistics.sequential` has the design and its error control. `ablate
    sweep`
    takes the looks as trials finish; `ablate replay OUT` applies the design to a finished fixed study."""
    recipes: dict[str, dict[str, dict[str, dict[str, Any]]]] = field(default_factory=dict)
    """Named training recipes, each given per preset in that preset's own units, as a preset's own settings are
    ({name: {preset: {"train": {...}}}}): what one base of the study was calibrated to at that preset, on that base
    alone. A study whose rows descend from two bases (the modern block's and the paper's) gives each base its own,
    and every row inherits its base's: the bases are then compared each as tuned for itself (Melis et al., 2018,
    "On the State of the Art of Evaluation in Neural Language Models"). A preset a recipe does not name trains with
    the preset's own settings."""
    recipe: str = PRESET_RECIPE
    """The recipe of rows that name none; 'preset': the preset's own settings."""
    min_seeds: int = 2
    """Seeds every row trains before the first look (sequential allocation)."""
    max_seeds: int = 6
    """The most seeds a row trains (sequential allocation): a comparison that needs more is out of reach."""

    @property
    def base_name(self) -> str | None:
        """The row in group 'base', which every other row is compared with; None in a study without one."""
        return next((r.name for r in self.rows if r.group == "base"), None)

    def compared_with(self) -> dict[str, set[str]]:
        """Control row -> the rows the table compares with it: the base with every other row, each claim's `against`
        row with the rows its comparisons name (the fixed design's k; the sequential design's controls are the rows
        the claims test, `design.controls_of`)."""
        base = self.base_name
        out: dict[str, set[str]] = {base: {r.name for r in self.rows if r.name != base}} if base else {}
        for claim in self.claims:
            for comp in claim.compare:
                if comp.against and comp.against != base:
                    out.setdefault(comp.against, set()).add(comp.row)
        return out

    def _in_preset_units(self, overrides: dict[str, dict[str, Any]], preset: Preset) -> dict[str, dict[str, Any]]:
        """Overrides of a `scale: paper` study scaled to the preset's sizes and steps; as written otherwise."""
        if self.scale != "paper":
            return overrides
        return {
            **overrides,
            "model": preset.scale_model(overrides.get("model", {})),
            "train": preset.scale_train(overrides.get("train", {})),
        }

    def recipe_of(self, row: Row) -> str:
        """The recipe `row` trains with: its own, else the study's."""
        return row.recipe or self.recipe

    def recipe_layer(self, row: Row, preset: Preset) -> dict[str, dict[str, Any]]:
        """`row`'s recipe at `preset` (in the preset's units); {} for the preset's own settings."""
        return self.recipes.get(self.recipe_of(row), {}).get(preset.name, {})

    def claim_coverage(self, rows: Iterable[str]) -> list[tuple[Claim, int, list[str]]]:
        """Each claim with how many of its comparisons `rows` (a --rows subset) can test, and the rows it lacks for
        the others: a comparison needs its row and its reference (`against`, else the base)."""
        ran = set(rows)
        base = self.base_name
        out = []
        for claim in self.claims:
            needed = [{c.row, c.against or base} - {None} for c in claim.compare]
            tested = sum(1 for names in needed if names <= ran)
            missing = sorted(set().union(*needed) - ran) if tested < len(needed) else []
            out.append((claim, tested, missing))
        return out

    def control_seed_counts(
        self, seeds: int, override: int | None = None, rows: list[str] | None = None
    ) -> dict[str, int]:
        """Control row -> how many seeds it trains when every other row trains `seeds` (see `control_seeds`);
        `override` (the command line's --control_seeds) sets every control's. `rows` (--rows): the rows this sweep
        runs, so k counts only the comparisons it makes (base with B1, C1, C4, D1: sqrt(4), not sqrt(20))."""
        fixed = override if override is not None else (None if self.control_seeds == "auto" else self.control_seeds)
        ran = set(rows) if rows is not None else None
        counts = {}
        for name, compared in self.compared_with().items():
            k = len(compared if ran is None else compared & ran)
            counts[name] = max(seeds, int(fixed) if fixed is not None else dunnett(k, seeds))
        return counts

    def seed_count(self, preset: str, given: int | None = None) -> int:
        """Seeds a row trains: `given` (--seeds) where there is one, else the study's or the preset's, whichever is
        more (`Preset.seeds`: what the preset's seed noise needs for the report's intervals)."""
        if given is not None:
            return given
        return max(self.seeds, get_preset(preset).seeds or 0)

    def control_seed_count(self, seeds: int) -> int:
        """How many seeds the base trains when every other row trains `seeds` (`seeds` without a base row)."""
        base = self.base_name
        return self.control_seed_counts(seeds).get(base, seeds) if base else seeds

    def row(self, name: str) -> Row:
        for row in self.rows:
            if row.name == name:
                return row
        names = [r.name for r in self.rows]
        raise AblateError(
            f"study {self.name!r} has no row {name!r}{did_you_mean(name, names)}: rows are {', '.join(names)}"
        )

    def run_config(self, row: Row | str, preset: Preset | str, seed: int = 0, **extra: dict[str, Any]) -> RunConfig:
        """The fully resolved config of one row at one preset and seed. `extra` holds section overrides applied
        last (command-line settings, tuned values)."""
        row = self.row(row) if isinstance(row, str) else row
        preset = get_preset(preset) if isinstance(preset, str) else preset
        # Layers, later ones winning: the preset (the paper's base at its size, and its settings), the study's
        # base, the row's recipe (`recipes`, in the preset's own units), the row, the seed, then command-line
        # settings. Overrides written in the paper's units are scaled.
        where = f"{self.source or self.name}: row {row.name!r}"
        try:  # scaling to the preset fails on a value it cannot scale to a whole number: the row is to blame
            layers = [
                preset.base_layer(),
                self._in_preset_units(self.base, preset),
                self.recipe_layer(row, preset),
                self._in_preset_units(row.overrides, preset),
            ]
        except AblateError as err:
            raise AblateError(f"{where}: {err}") from None
        layers += [{"train": {"seed": seed}}, extra]
        try:
            return build_run_config(*layers)
        except AblateError as err:
            blame = where
            if any(extra.values()):  # the row builds without the command line's settings: they are to blame
                try:
                    build_run_config(*layers[:-1])
                    blame = f"the command line (on row {row.name!r} of {self.name} at preset {preset.name})"
                except AblateError:
                    pass
            raise AblateError(f"{blame}: {err}") from None

    def validate(self, presets: list[str] | None = None) -> None:
        """Build every row's config at the given presets (default: all), so any bad value fails now, with its row."""
        for preset in presets or list(PRESETS):
            for row in self.rows:
                self.run_config(row, preset)


def builtin_studies() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml") if not p.name.endswith(".claims.yaml"))


def load_study(name_or_path: str | Path) -> Study:
    """A built-in study by name ('table3') or a user's YAML file, validated at every preset it can run at."""
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        path = BUILTIN_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            raise AblateError(
                f"no study {str(name_or_path)!r}: give a YAML file or one of the built-in studies "
                f"({', '.join(builtin_studies())})"
            )
    if not path.is_file():
        raise AblateError(f"{path}: study file not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise AblateError(not_utf8(path, err.object, err.start)) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise AblateError(f"{path}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    study = parse_study(raw, source=str(path))
    if study.default_preset:
        study.validate([study.default_preset])
    else:
        study.validate(["paper"] if study.scale == "none" else None)
    return study


def parse_study(raw: Any, source: str = "<study>") -> Study:
    """Check the structure of a study mapping and turn it into a `Study` (values are checked by `validate`)."""
    scale, seeds, control, preset = _settings(raw, source)
    allocation, min_seeds, max_seeds = check_allocation(raw, source)
    base = _sections(raw.get("base") or {}, f"{source}: base")
    rows = _rows(raw.get("rows"), source)
    recipes, recipe = _recipes(raw, rows, source)
    space = tuple(_search_dim(k, v, source) for k, v in (raw.get("search_space") or {}).items())
    objective = str(raw.get("tune_objective", "bleu"))
    if objective not in TUNE_OBJECTIVES:
        raise AblateError(f"{source}: tune_objective {objective!r}: choose one of {', '.join(TUNE_OBJECTIVES)}")
    return Study(
        claims=_claims(raw.get("claims"), source, rows),
        name=str(raw.get("name") or Path(source).stem),
        description=str(raw.get("description", "")),
        scale=scale,
        seeds=seeds,
        control_seeds=control,
        base=base,
        rows=tuple(rows),
        search_space=space,
        tune_objective=objective,
        default_preset=preset,
        source=source,
        allocation=allocation,
        min_seeds=min_seeds,
        max_seeds=max_seeds,
        recipes=recipes,
        recipe=recipe,
    )


def _recipes(raw: dict[str, Any], rows: list[Row], source: str) -> tuple[dict[str, Any], str]:
    """`recipes:` ({name: {preset: {section: {field: value}}}}) and `recipe:` checked, and every row's recipe known."""
    spec = raw.get("recipes") or {}
    if not isinstance(spec, dict):
        raise AblateError(f"{source}: recipes must map a name to {{preset: {{train: {{...}}}}}}")
    recipes: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for name, by_preset in spec.items():
        where = f"{source}: recipes.{name}"
        if name == PRESET_RECIPE:
            raise AblateError(
                f"{where}: '{PRESET_RECIPE}' names the preset's own settings; give the recipe another name"
            )
        if not isinstance(by_preset, dict):
            raise AblateError(
                f"{where}: expected {{preset: {{train: {{...}}}}}}, e.g. {{tiny: {{train: {{warmup_steps: 400}}}}}}"
            )
        for preset in by_preset:
            if preset not in PRESETS:
                raise AblateError(f"{where}: unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
        recipes[str(name)] = {p: _sections(v or {}, f"{where}.{p}") for p, v in by_preset.items()}
    recipe = str(raw.get("recipe", PRESET_RECIPE))
    known = [*recipes, PRESET_RECIPE]
    for owner, name in [("recipe", recipe), *((f"row {r.name!r}: recipe", r.recipe) for r in rows if r.recipe)]:
        if name not in known:
            raise AblateError(f"{source}: {owner} {name!r} is not in recipes; choose from {', '.join(known)}")
    return recipes, recipe


def check_allocation(raw: dict[str, Any], source: str) -> tuple[Literal["fixed", "sequential"], int, int]:
    """allocation, min_seeds and max_seeds, checked: min_seeds >= 1 and max_seeds >= min_seeds."""
    allocation = raw.get("allocation", "fixed")
    if allocation not in ALLOCATIONS:
        raise AblateError(f"{source}: allocation must be one of {', '.join(ALLOCATIONS)}, got {allocation!r}")
    low, high = raw.get("min_seeds", 2), raw.get("max_seeds", 6)
    for key, value in (("min_seeds", low), ("max_seeds", high)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise AblateError(f"{source}: {key} must be a positive integer, got {value!r}")
    if high < low:
        raise AblateError(f"{source}: max_seeds ({high}) must be at least min_seeds ({low})")
    return allocation, low, high


def _settings(raw: Any, source: str) -> tuple[str, int, int | Literal["auto"], str | None]:
    """The study's fields checked, and its scalar settings: scale, seeds, control_seeds, preset."""
    if not isinstance(raw, dict):
        raise AblateError(f"{source}: a study is a mapping with 'name' and 'rows'")
    unknown = set(raw) - STUDY_KEYS
    if unknown:
        raise AblateError(
            f"{source}: unknown field {sorted(unknown)[0]!r}; a study has {', '.join(sorted(STUDY_KEYS))}"
        )
    scale = raw.get("scale", "none")
    if scale not in ("paper", "none"):
        raise AblateError(f"{source}: scale must be 'paper' or 'none', got {scale!r}")
    seeds = raw.get("seeds", 1)
    if not isinstance(seeds, int) or seeds < 1:
        raise AblateError(f"{source}: seeds must be a positive integer, got {seeds!r}")
    control = raw.get("control_seeds", "auto")
    if control != "auto" and (not isinstance(control, int) or isinstance(control, bool) or control < 1):
        raise AblateError(f"{source}: control_seeds must be 'auto' or a positive integer, got {control!r}")
    preset = raw.get("preset")
    if preset is not None and preset not in PRESETS:
        raise AblateError(f"{source}: unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return scale, seeds, control, preset


def _rows(rows_raw: Any, source: str) -> list[Row]:
    """`rows:`, a non-empty list of rows with distinct names."""
    if not isinstance(rows_raw, list) or not rows_raw:
        raise AblateError(f"{source}: 'rows' must be a non-empty list of {{name: ..., model: {{...}}}}")
    rows: list[Row] = []
    seen: set[str] = set()
    for i, item in enumerate(rows_raw, start=1):
        if not isinstance(item, dict) or "name" not in item:
            raise AblateError(f"{source}: row {i} must be a mapping with a 'name'")
        name = str(item["name"])
        if name in seen:
            raise AblateError(f"{source}: row {name!r}: duplicate row name; every row needs its own name")
        seen.add(name)
        rows.append(_row(item, source))
    return rows


def _row(item: dict[str, Any], source: str) -> Row:
    """One row: its name, group, section overrides and the paper's numbers for it."""
    row_name = str(item["name"])
    where = f"{source}: row {row_name!r}"
    bad = set(item) - ROW_KEYS
    if bad:
        raise AblateError(f"{where}: unknown field {sorted(bad)[0]!r}; a row has {', '.join(sorted(ROW_KEYS))}")
    overrides = _sections({k: v for k, v in item.items() if k in SECTIONS}, where)
    paper = item.get("paper") or {}
    if not isinstance(paper, dict) or not all(isinstance(v, int | float) for v in paper.values()):
        raise AblateError(f"{where}: paper must map metric names to numbers, e.g. {{bleu: 25.8, ppl: 4.92}}")
    recipe = item.get("recipe")
    return Row(
        name=row_name,
        group=str(item.get("group", row_name)),
        overrides=overrides,
        paper=paper,
        recipe=str(recipe) if recipe is not None else None,
    )


def _claims(spec: Any, source: str, rows: list[Row]) -> tuple[Claim, ...]:
    """`claims:` as a file name (relative to the study file) or an inline list, checked against the rows."""
    if spec is None:
        return ()
    names = [r.name for r in rows]
    base = next((r.name for r in rows if r.group == "base"), None)
    if isinstance(spec, str):
        path = Path(spec) if Path(spec).is_absolute() else Path(source).parent / spec
        return tuple(load_claims(path, names, base))
    return tuple(parse_claims(spec, f"{source}: claims", names, base))


def _sections(values: Any, where: str) -> dict[str, dict[str, Any]]:
    """Check {section: {field: value}} against the config dataclasses (names and types, as on the command line);
    the error names `where` and the section or field."""
    if not isinstance(values, dict):
        raise AblateError(f"{where}: overrides must be a mapping of sections ({', '.join(SECTIONS)})")
    try:
        return check_sections(values)
    except AblateError as err:
        raise AblateError(f"{where}: {err}") from None


def _search_dim(name: str, spec: Any, source: str) -> SearchDim:
    section, _, key = name.partition(".")
    _sections({section: {key: None}}, f"{source}: search_space")
    if isinstance(spec, list):
        return SearchDim(name=name, type="categorical", choices=tuple(spec))
    if not isinstance(spec, dict) or "low" not in spec or "high" not in spec:
        raise AblateError(f"{source}: search_space.{name} needs low and high (or a list of choices)")
    kind = spec.get("type", "int" if isinstance(spec["low"], int) and isinstance(spec["high"], int) else "float")
    if kind not in ("int", "float") or not spec["low"] < spec["high"]:
        raise AblateError(f"{source}: search_space.{name}: need low < high and type int or float")
    return SearchDim(name=name, low=spec["low"], high=spec["high"], log=bool(spec.get("log", False)), type=kind)


def coverage_summary(study: Study, rows: Iterable[str]) -> str | None:
    """What a --rows subset tests, as the rest of a sentence ("--rows base,B1 test 1 of 8 claims; untested: A-single-
    head (needs A1); ..."): the claims it leaves untested or partly tested, each with the rows it still needs. None
    when the subset tests every claim (or the study has none)."""
    coverage = study.claim_coverage(rows)
    whole = [claim.id for claim, tested, _ in coverage if tested == len(claim.compare)]
    left = [
        f"{claim.id} ({'partly, ' if tested else ''}needs {', '.join(missing)})"
        for claim, tested, missing in coverage
        if tested < len(claim.compare)
    ]
    if not left:
        return None
    return f"test {len(whole)} of {len(coverage)} claims; untested: {'; '.join(left)}"


def parse_rows(text: str | Sequence[str] | None, known: Sequence[str]) -> list[str] | None:
    """--rows ('B1,C1' or ['B1', 'C1']) as row names, each once, checked against the study's (`known`): AblateError
    naming an unknown one, with the closest match; None without --rows (every row). The one parser of --rows: the
    sweep, `ablate studies` and the reports read a row list the same way."""
    if text is None:
        return None
    names = list(dict.fromkeys(n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()))
    if not names:
        raise AblateError("--rows: no row given; name rows of the study, e.g. --rows base,B1")
    for name in names:
        if name not in known:
            raise AblateError(f"--rows: the study has no row '{name}'{did_you_mean(name, known)}; rows are "
                              f"{', '.join(known)}")  # fmt: skip
    return names
