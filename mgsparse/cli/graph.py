"""`mgsparse graph`: the computation graph of one training step's loss, as Graphviz DOT (and SVG/PNG).

The loss is exactly what the first step of `mgsparse train` differentiates for that config:
the full-graph masked cross-entropy of a fresh GNN, or the first mini-batch through a fresh
MLP for a point cloud. Rendering needs Graphviz's `dot` program; without it the DOT text is
still written and the message says how to install Graphviz.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings
from enum import Enum
from pathlib import Path

import numpy as np
import typer

from mgsparse.cli import app
from mgsparse.cli.datasets import download_bar
from mgsparse.cli.render import fail, out, warn
from mgsparse.config import POINT_CLOUD_DATASETS, Config, load_config
from mgsparse.engine import Tensor
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.problem import build_model, load_graph, prepare
from mgsparse.train import training_loss
from mgsparse.train_points import point_step_loss
from mgsparse.viz import summarize, to_dot

INSTALL_GRAPHVIZ = "apt-get install graphviz (macOS: brew install graphviz)"
RENDER_TIMEOUT_S = 120


class Format(str, Enum):
    svg = "svg"
    png = "png"
    dot = "dot"  # the DOT text only, no rendering


def step_loss(config: Config) -> Tensor:
    """The loss of the first training step for `config`, with its graph (nothing run backward)."""
    if config.dataset.name in POINT_CLOUD_DATASETS:
        return point_step_loss(config)
    with download_bar() as progress:  # silent unless bytes actually move
        problem = prepare(config, load_graph(config.dataset, progress))
    model = build_model(config.model, problem, np.random.default_rng(config.train.seed))
    model.train()
    return training_loss(model, problem)


@app.command()
def graph(
    config_path: Path = typer.Argument(..., metavar="CONFIG", help="YAML config, e.g. configs/karate.yaml"),
    out_path: Path = typer.Option(Path("graph.dot"), "--out", help="Where to write the DOT text"),
    fmt: Format = typer.Option(Format.svg, "--format",
                               help="Also render next to it with Graphviz (svg, png), or dot: DOT only"),
    set_: list[str] = typer.Option([], "--set", help="Override a key: --set model.hidden=8 (repeatable)"),
    max_nodes: int = typer.Option(5000, "--max-nodes", min=1,
                                  help="Above this many values, write a summary of op counts instead"),
) -> None:
    """Draw the computation graph of one training step's loss (Graphviz DOT, SVG or PNG)."""
    try:
        if out_path.suffix.lower() in (".svg", ".png"):
            raise ConfigError(f"--out {out_path} names the DOT file (e.g. graph.dot); the "
                              f"{out_path.suffix[1:].upper()} is rendered next to it with --format")
        config = load_config(config_path, list(set_))
        loss = step_loss(config)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text = to_dot(loss, max_nodes=max_nodes)
        _write(out_path, text)
    except MgsparseError as e:
        fail(e)
    for w in caught:  # over max_nodes: viz returned a summary and said so
        warn(str(w.message))
    counts = summarize(loss)
    listing = ", ".join(f"{op} {n}" for op, n in counts.items())
    out.print(f"wrote {out_path}: {sum(counts.values())} op applications ({listing})",
              markup=False, highlight=False, soft_wrap=True)
    if fmt is not Format.dot:
        _render(out_path, fmt.value)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise DataError(f"cannot write {path}: {e.strerror or e}") from None


def _render(dot_path: Path, fmt: str) -> None:
    """Run `dot -T<fmt>`; a missing Graphviz is a hint (the DOT is written), a failing one an error."""
    target = dot_path.with_suffix(f".{fmt}")
    program = shutil.which("dot")
    if program is None:
        warn(f"Graphviz `dot` is not installed, so {target} was not rendered; install it "
             f"({INSTALL_GRAPHVIZ}) or open {dot_path} in any Graphviz viewer")
        return
    try:
        done = subprocess.run([program, f"-T{fmt}", str(dot_path), "-o", str(target)],
                              capture_output=True, text=True, timeout=RENDER_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        fail(f"dot -T{fmt} {dot_path} took more than {RENDER_TIMEOUT_S} s; try --max-nodes "
             "lower or --format dot")
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        fail(f"dot -T{fmt} {dot_path} failed: {reason}")
    out.print(f"rendered {target}", markup=False, highlight=False, soft_wrap=True)
