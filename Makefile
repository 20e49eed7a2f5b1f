# Two entry points, both idempotent: `make study` and `make test` (see README.md).
# The virtual environment is (re)built only when pyproject.toml or constraints.txt change.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,postgres,dashboard,slurm
STAMP := $(VENV)/.installed

.PHONY: study test setup lint docs bench clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "ablate needs Python >= 3.10")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# constraints.txt pins the tested torch: the CPU wheel here, the matching CUDA build on a GPU machine,
	# never a newer torch with several GB of CUDA packages.
	PIP_CONSTRAINT=constraints.txt $(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

setup: $(STAMP)

study: $(STAMP)
	$(BIN)/ablate sweep table3 --preset tiny

# One pytest worker per core (pytest-xdist), each pinned to its own cores (tests/conftest.py), slow tests handed out
# first; the tests of one xdist_group run on one worker (--dist loadgroup): the SLURM tests one at a time, and the tests
# sharing a module-scoped fixture (six run a sweep), built once. `pytest tests/...` alone runs in one process.
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/pyright
	$(MAKE) docs

# The docs site, built strictly into site/ (a broken link or anchor, a page left out of the nav, a module mkdocstrings
# cannot find, or a config field without a docstring fails it). `$(BIN)/mkdocs serve` previews it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(BIN)/ablate bench --preset tiny

clean:
	rm -rf $(VENV) runs .pytest_cache site
