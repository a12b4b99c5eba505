"""`mgsparse explain`: which edges and features a saved run's node predictions used."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import typer
from rich.table import Table

from mgsparse.cli.outputs import PICTURES, check_output
from mgsparse.cli.plots import check_plot_target
from mgsparse.cli.render import err_console, fail
from mgsparse.cli.render import out as console
from mgsparse.data.atomic import atomic_write
from mgsparse.errors import ConfigError, DataError, MgsparseError
from mgsparse.run.explain.methods import METHODS, Options
from mgsparse.run.explain.saved import CSV_HEADER, Explainer, Explanation, csv_text, explain_many


@contextlib.contextmanager
def _stop_on_ctrl_c() -> Iterator[list]:
    """A flag Ctrl-C (or SIGTERM) raises between two nodes: the node under way finishes,
    what is written stays, the handlers are restored after."""
    flag: list = []

    def handler(signum: int, frame: object) -> None:
        flag.append(signum)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


def _table(e: Explanation, top: int) -> Table:
    table = Table(title=f"node {e.node}: predicted class {e.prediction} ({e.method})")
    for name in ("rank", "edge (source → target)", "score", *(
            ["motif edge"] if e.truth is not None else [])):
        table.add_column(name, justify="right")
    order = np.argsort(-e.edge_score, kind="stable")[:top]
    for rank, i in enumerate(order, 1):
        truth = [] if e.truth is None else ["yes" if e.truth[i] else "no"]
        table.add_row(str(rank), f"{e.edge_index[0, i]} → {e.edge_index[1, i]}",
                      f"{e.edge_score[i]:.4g}", *truth)
    features = np.argsort(-e.feature_score, kind="stable")[:min(top, 5)]
    table.caption = ("top features: " + ", ".join(f"{j} ({e.feature_score[j]:.3g})"
                                                  for j in features))
    return table


def _figures(summary: dict) -> str:
    def num(v):
        return "-" if v is None else f"{v:.4f}"
    return (f"{summary['nodes']} nodes ({summary['method']}): AUC {num(summary['auc_mean'])} "
            f"(mean over {summary['auc_nodes']}; pooled {num(summary['auc_pooled'])}), "
            f"fidelity+ {num(summary['fidelity_plus'])}, fidelity- "
            f"{num(summary['fidelity_minus'])}, sparsity {num(summary['sparsity'])}, "
            f"{num(summary['seconds_per_item'])} s per node")


def _check(options: Options, method: str, top_k: int, outs: dict) -> None:
    if method not in METHODS:
        raise ConfigError(f"--method {method!r}: one of {', '.join(METHODS)}")
    if top_k < 1:
        raise ConfigError(f"--top-k must be >= 1, got {top_k}")
    options.check()
    taken: dict = {}
    check_output(outs["--out"], "--out", suffixes=(".csv",), taken=taken)
    check_output(outs["--json"], "--json", suffixes=(".json",), taken=taken)
    check_output(outs["--plot"], "--plot", suffixes=PICTURES, taken=taken)
    if outs["--plot"] is not None:
        check_plot_target(outs["--plot"])  # matplotlib installed: before any work


def explain(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The --out folder of `mgsparse train`"),
    node: int | None = typer.Option(None, "--node", help="Explain this node (the dataset's id)"),
    nodes: str | None = typer.Option(
        None, "--nodes", help="Explain many: a file of node ids (one a line), or 'motif' "
        "(every node of a planted motif: ba-shapes, tree-cycles)"),
    method: str = typer.Option("gnnexplainer", "--method", help="saliency | ig | gnnexplainer"),
    steps: int = typer.Option(50, "--steps", help="ig: Riemann terms from mask 0 to 1"),
    epochs: int = typer.Option(100, "--epochs", help="gnnexplainer: Adam steps"),
    lr: float = typer.Option(0.01, "--lr", help="gnnexplainer: Adam's learning rate"),
    edge_size: float = typer.Option(0.005, "--edge-size", help="gnnexplainer: Σ mask penalty"),
    edge_ent: float = typer.Option(1.0, "--edge-ent", help="gnnexplainer: mask entropy penalty"),
    feat_size: float = typer.Option(1.0, "--feat-size", help="gnnexplainer: feature mask size"),
    feat_ent: float = typer.Option(0.1, "--feat-ent", help="gnnexplainer: its entropy"),
    seed: int = typer.Option(0, "--seed", help="gnnexplainer: the initial masks' seed"),
    feature_mask: bool = typer.Option(True, "--feature-mask/--no-feature-mask",
                                      help="gnnexplainer: learn a feature-column mask too"),
    symmetric: bool = typer.Option(False, "--symmetric", help="gnnexplainer: one mask entry "
                                   "per undirected edge, as the paper's code"),
    top_k: int = typer.Option(12, "--top-k", help="Edges kept or removed for fidelity±"),
    top: int = typer.Option(10, "--top", help="Rows of the table (one node)"),
    out: Path | None = typer.Option(None, "--out", help="Write every edge's score here (CSV: "
                                    "node, source, target, score, truth)"),
    as_json: Path | None = typer.Option(None, "--json", help="Write the figures here (JSON)"),
    plot: Path | None = typer.Option(None, "--plot", help="Draw the explained subgraph (one "
                                     "node; .png, .svg, .pdf; the plot extra)"),
    run: int | None = typer.Option(None, "--run", help="Which saved run (default: the first)"),
) -> None:
    """Explain a trained run's node predictions: the edges and features they used."""
    options = Options(steps, epochs, lr, edge_size, edge_ent, feat_size, feat_ent, seed,
                      feature_mask, symmetric)
    try:
        _check(options, method, top_k, {"--out": out, "--json": as_json, "--plot": plot})
        if (node is None) == (nodes is None):
            raise ConfigError("give --node N or --nodes FILE|motif (one of them)")
        if plot is not None and node is None:
            raise ConfigError("--plot draws one node's explanation: use it with --node")
        explainer = Explainer(run_dir, run)
        chosen = explainer.nodes(node if node is not None else nodes)
        summary, last = _explain(explainer, chosen, method, options, top_k, out,
                                 node is not None, top)
        if as_json is not None:
            atomic_write(as_json, lambda f: f.write(json.dumps(summary, indent=2) + "\n"))
        if plot is not None and last is not None:
            from mgsparse.cli.explain_plot import draw_explanation
            draw_explanation(explainer, last, plot)
    except MgsparseError as e:
        fail(e)
    except OSError as e:
        fail(DataError(f"cannot write {e.filename}: {e.strerror or e}"))
    err_console.print(_figures(summary), markup=False)
    if summary["interrupted"]:
        raise typer.Exit(130)


def _explain(explainer: Explainer, chosen: np.ndarray, method: str, options: Options,
             top_k: int, out: Path | None, single: bool,
             top: int) -> tuple[dict, Explanation | None]:
    """Explain `chosen`, each node's rows appended to `out` as it is done (so Ctrl-C keeps
    them); the summary's figures, and the last explanation (for a picture)."""
    stream = None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        stream = out.open("w", encoding="utf-8", newline="")
        stream.write(csv_text([], header=True))
    status = err_console.status(f"explaining {len(chosen)} nodes", spinner="dots")

    def written(e: Explanation, done: int) -> None:
        if stream is not None:
            stream.write(csv_text(e.csv_rows()))
            stream.flush()
        status.update(f"explained {done}/{len(chosen)} nodes ({method})")

    try:
        with _stop_on_ctrl_c() as stop, (status if not single and err_console.is_terminal
                                         else contextlib.nullcontext()):
            summary = explain_many(explainer, chosen, method, options, top_k, written,
                                   lambda: bool(stop))
    finally:
        if stream is not None:
            stream.close()
    if single and summary.items:
        console.print(_table(summary.items[0], top))
    return summary.as_dict(), summary.items[-1] if summary.items else None


__all__ = ["CSV_HEADER", "explain"]
