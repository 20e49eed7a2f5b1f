"""What every process of ablate shares, whatever its job: where it runs (`environment`: its job, rank and
cores, in ablate's own variables), how it stops (`interrupt`: Ctrl-C, signals, a full disk, said in one line), how it
shares a GPU among its workers (`mps`), and which storage it connects to without ever showing a password (`urls`)."""

from __future__ import annotations

from ablate.ablations.runtime import (
    environment,  # noqa: F401
    interrupt,  # noqa: F401
    urls,  # noqa: F401
)
from ablate.ablations.runtime.interrupt import (  # noqa: F401 - the public face
    check_folder,
)
from ablate.ablations.runtime.urls import (  # noqa: F401 - the public face
    check_escaped,
    chosen_url,
    given_url,
)

__all__ = [
    "check_escaped",
    "check_folder",
    "chosen_url",
    "environment",
    "given_url",
    "interrupt",
]
