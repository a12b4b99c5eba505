"""The progress callback a graph is built under: download bytes, and the phases between them.

One callback travels from the CLI through `load_section`, the sources and `make_task`:

- ``progress(done_bytes, total_bytes_or_None, filename)`` as a download's bytes arrive
  (`mgsparse.data.download.fetch`); any three-argument callable will do;
- ``progress.phase(name, detail)``, if the callback has that method, as a step that moves
  no bytes but takes a while begins: ``generating`` (a synthetic graph), ``normalising``
  (the feature rows), ``placing`` (the run's operands, receptive fields and samplers). A
  million-node graph spends seconds in each, and a screen that stays blank that long looks
  hung. A plain function has no ``phase`` and simply hears nothing of them.

The library only announces; the CLI decides what to draw (`mgsparse.cli.progress`).
"""

from __future__ import annotations

from typing import Any

PHASES = ("generating", "normalising", "placing")


def announce(progress: Any, phase: str, detail: str = "") -> None:
    """Tell `progress` that `phase` begins (`detail`: what it works on), if it listens for
    phases; a callback without a ``phase`` method, or None, is left alone."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; expected one of {', '.join(PHASES)}")
    listener = getattr(progress, "phase", None)
    if listener is not None:
        listener(phase, detail)
