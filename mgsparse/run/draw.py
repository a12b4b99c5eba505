"""`mgsparse graph`: the computation graph of one training step's loss, as DOT (and SVG/PNG).

The loss is exactly what the first step of `mgsparse train` differentiates for that config
(the task's first batch through a fresh model). Rendering needs Graphviz's `dot` program;
without it the DOT text is still written and the result says how to install Graphviz.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from mgsparse.config import Config
from mgsparse.engine.draw import summarize, to_dot
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.run.kinds import make_task
from mgsparse.run.loop import first_step_loss
from mgsparse.run.task import Progress

INSTALL_GRAPHVIZ = "apt-get install graphviz, or brew install graphviz on macOS"
RENDER_TIMEOUT_S = 120
FORMATS = ("svg", "png", "dot")  # dot: the DOT text only, no rendering


@dataclass
class Drawing:
    dot_path: Path
    op_counts: dict[str, int]
    rendered: Path | None = None
    notes: list[str] = field(default_factory=list)  # warnings for the user


def draw_step(config: Config, out_path: Path, fmt: str = "svg", max_nodes: int = 5000,
              progress: Progress | None = None) -> Drawing:
    """Write the DOT of the first step's loss to `out_path` and render it next to it."""
    if out_path.suffix.lower() in (".svg", ".png"):
        raise ConfigError(f"--out {out_path} names the DOT file (e.g. graph.dot); the "
                          f"{out_path.suffix[1:].upper()} is rendered next to it with --format")
    loss = first_step_loss(config, make_task(config, progress))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = to_dot(loss, max_nodes=max_nodes)
    try:
        out_path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise DataError(f"cannot write {out_path}: {e.strerror or e}") from None
    drawing = Drawing(out_path, summarize(loss), notes=[str(w.message) for w in caught])
    if fmt != "dot":
        _render(drawing, fmt)
    return drawing


def _render(drawing: Drawing, fmt: str) -> None:
    """Run `dot -T<fmt>`; a missing Graphviz is a note (the DOT is written), a failing one an
    error."""
    dot_path = drawing.dot_path
    target = dot_path.with_suffix(f".{fmt}")
    program = shutil.which("dot")
    if program is None:
        drawing.notes.append(f"Graphviz `dot` is not installed, so {target} was not rendered; "
                             f"install it ({INSTALL_GRAPHVIZ}) or open {dot_path} in any "
                             "Graphviz viewer")
        return
    try:
        done = subprocess.run([program, f"-T{fmt}", str(dot_path), "-o", str(target)],
                              capture_output=True, text=True, timeout=RENDER_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        raise MgsparseError(f"dot -T{fmt} {dot_path} took more than {RENDER_TIMEOUT_S} s; try "
                            "--max-nodes lower or --format dot") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise MgsparseError(f"dot -T{fmt} {dot_path} failed: {reason}")
    drawing.rendered = target
