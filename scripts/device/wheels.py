"""The wheels a lent card's machine lacks, for the lease scripts beside this one (`prepare.sh` runs this).

The card's image has its own Python (3.12) and packages but no network. What ablate needs there is every
distribution our installed `ablate` requires (with the extras the lease scripts use), found by walking the
requirements of this machine's environment (importlib.metadata), less the packages the image holds (the list
`--image` names, one per line or comma-separated, as the device notes give it). Each missing one is downloaded as a
cp312 manylinux wheel at the version installed here (pip resolves nothing: `--no-deps`), so the card runs what the
tests here ran.

    python scripts/device/wheels.py --image image-packages.txt --dest .whl [--extras slurm,bench,dev]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "manylinux_2_24_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64",
             "manylinux_2_35_x86_64"]  # fmt: skip


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str, extras: set[str]) -> dict[str, str]:
    """Canonical name -> installed version of `root` and everything it requires here, under `extras`."""
    found: dict[str, str] = {}
    seen: set[tuple[str, frozenset]] = set()
    todo = [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a marker's platform package, or an extra not installed here
        key = canonical(dist.metadata["Name"])
        if (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        found[key] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None:
                todo.append((req.name, frozenset(req.extras)))
            elif "extra" in str(req.marker):  # an extra's requirement: only the extras asked for
                if any(req.marker.evaluate({"extra": e}) for e in wanted):
                    todo.append((req.name, frozenset(req.extras)))
            elif req.marker.evaluate({"extra": "", "python_version": "3.12", "python_full_version": "3.12.3"}):
                todo.append((req.name, frozenset(req.extras)))  # the card's Python, this machine's platform
    return found


def image_packages(path: Path) -> set[str]:
    return {canonical(p) for p in re.split(r"[,\s]+", path.read_text(encoding="utf-8")) if p.strip(" .")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=Path, required=True, help="the card image's packages (names)")
    parser.add_argument("--dest", type=Path, default=Path(".whl"))
    parser.add_argument("--extras", default="slurm,bench", help="ablate's extras the lease needs")
    args = parser.parse_args()
    need = closure("ablate", set(filter(None, args.extras.split(","))))
    need.update(closure("pytest", set()))
    need.update(closure("pytest-timeout", set()))
    missing = {name: version for name, version in sorted(need.items())
               if name not in image_packages(args.image) and name != "ablate"}  # fmt: skip
    print(f"{len(missing)} distribution(s) the image lacks: " + ", ".join(f"{n}=={v}" for n, v in missing.items()))
    args.dest.mkdir(parents=True, exist_ok=True)
    failed = []
    for name, version in missing.items():
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
               "3.12", "--implementation", "cp", *[f"--platform={p}" for p in PLATFORMS], "-d", str(args.dest),
               f"{name}=={version}"]  # fmt: skip
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(f"{name}=={version}")
    if failed:
        print(f"no wheel for: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
