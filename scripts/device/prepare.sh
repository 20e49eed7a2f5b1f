#!/usr/bin/env bash
# Before a lease, here, where the package registries answer (a lent machine reaches nothing): `.whl/` with the wheels
# the card image lacks plus ours, `.ablate-cache/` with the tiny and paper presets' prepared corpora (the study's, the
# short runs' and the paper bench's data), both kept out of git and named in the run's `carry` (64 MiB in all; about
# 37 MiB). common.sh installs and uses them there. IMAGE_PACKAGES: the image's package names, as the device notes
# list them.
#   bash scripts/device/prepare.sh IMAGE_PACKAGES
set -eu
cd "$(git rev-parse --show-toplevel)"
IMAGE=${1:?name a file with the card image\'s package names (the device notes list them)}
mkdir -p .git/info
for p in /.whl/ /.ablate-cache/; do grep -qxF "$p" .git/info/exclude 2>/dev/null || echo "$p" >>.git/info/exclude; done
rm -rf .whl .ablate-cache
.venv/bin/python scripts/device/wheels.py --image "$IMAGE" --dest .whl 2> >(grep -v "^WARNING: Location" >&2)
.venv/bin/pip wheel -q --no-deps --no-build-isolation -w .whl .
ABLATE_CACHE=$PWD/.ablate-cache .venv/bin/python -c "
from ablate.ablations.study.definition import load_study
from ablate.data.prepare import prepare
study = load_study('table3')
for preset in ('tiny', 'paper'):  # the study's and the short runs' data; the paper base bench's
    prepare(study.run_config(study.rows[0], preset, 0).data, progress=True)"
du -sh .whl .ablate-cache
