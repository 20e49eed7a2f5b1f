"""Where `SweepJob` lived before the launchers moved to `ablations.launchers` (ablate 0.1, up to November 2026).

submitit pickles each job with the path of its class: a job array submitted by an older ablate and still queued (or
requeued) when the install was upgraded loads `ablations.slurm.SweepJob`. Nothing else should import this module.
"""

from ablations.launchers.slurm import SweepJob

__all__ = ["SweepJob"]
