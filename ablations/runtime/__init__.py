"""What every process of ablate shares, whatever its job: where it runs (`environment`: its job, rank and
cores, in ablate's own variables), how it stops (`interrupt`: Ctrl-C, signals, a full disk, said in one line), how it
shares a GPU among its workers (`mps`), and which storage it connects to without ever showing a password (`urls`)."""

from __future__ import annotations

from ablate.ablations.runtime import (
    environment,  # noqa: F401
    interrupt,  # noqa: F401
    urls,  # noqa: F401
)
from ablate.ablations.runtime.environment import (  # noqa: F401 - the public face
    WorkerEnv,
    cpu_cores,
    cpu_model,
    for_local_worker,
    here,
    job_variables,
    process_state,
)
from ablate.ablations.runtime.interrupt import (  # noqa: F401 - the public face
    Interrupted,
    check_folder,
    disk_error,
    graceful,
    path_error,
    requested,
)
from ablate.ablations.runtime.urls import (  # noqa: F401 - the public face
    ENV_VAR,
    check_escaped,
    chosen_url,
    given_url,
    redact,
    scrub,
    storage_url,
    with_driver,
)

__all__ = [
    "ENV_VAR",
    "Interrupted",
    "WorkerEnv",
    "check_escaped",
    "check_folder",
    "chosen_url",
    "cpu_cores",
    "cpu_model",
    "disk_error",
    "environment",
    "for_local_worker",
    "given_url",
    "graceful",
    "here",
    "interrupt",
    "job_variables",
    "path_error",
    "process_state",
    "redact",
    "requested",
    "scrub",
    "storage_url",
    "urls",
    "with_driver",
]
