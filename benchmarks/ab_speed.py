"""A/B of this tree's attention and sampled-training kernels against an earlier revision's,
alternating in one process (so both see the same machine), with the losses compared bitwise.

The earlier side is this tree with a few functions swapped for their versions at `--rev`
(read with `git show`, loaded as separate modules), so only those differ:

- `gat`: a whole-graph GAT training step (8 heads × 8 hidden, benchmarks/compare_gat.py's
  recipe) with `--rev`'s edge attention (`Gather`s + `leaky_relu` + `row_softmax`) and its
  SDDMM kernel in place of the fused `attention_softmax` and the current kernel;
- `sampled`: a sampled GraphSAGE epoch (benchmarks/compare_sampled.py's setting) with `--rev`'s
  `gather_rows`;
- `attention`: the same GAT step with `--rev`'s fused `AttentionSoftmax` (one pass over all
  entries) in place of this tree's (block by block of whole rows on the thread pool;
  b704e4c predates it);
- `elementwise`: the whole-graph GCN epoch below with `--rev`'s ReLU, LeakyReLU, ELU and
  dropout ops (one call each) in place of this tree's (row blocks on the thread pool; c1ffb82
  predates them);
- `sage`: a whole-graph GraphSAGE step (compare_gat.py `--model sage`, 100 labelled nodes, so
  the weight gradients are zero outside a few rows) with `--rev`'s `sparse_rows` (1f11607
  counted the nonzero entries, then marked the rows: two passes over a sparse gradient);
- `gcn`: a whole-graph GCN epoch (training step and scores, `train.receptive_field: false`) on
  the ogbn-arxiv-shaped graph of benchmarks/compare_pyg.py with `--rev`'s `GCNConv.forward`,
  cross-entropy forward and `sparse_rows` (2f38205 predates GCNConv's choice of the side to
  propagate, the fused linear and the early-stopping nonzero count);
- `scatter`: a whole-graph GCN epoch (training step and scores) on the 100k SBM (`--nodes 0`:
  the arxiv-shaped graph) with `--rev`'s SpMM forward (every A on its own CSR, row blocks)
  against this tree's, which reads a fixed symmetric Â's own CSR as CSC on one call (at 2
  threads both take the row blocks);
- `slices`: the `scatter` epoch with the products' CSC read cut by A's column slices
  (`kernels/slices.py`) against what ran before them (at 2 threads the CSR kernel's row
  blocks, at 1 one call): an in-tree switch (`kernels.tuning.MIN_WIDTH` and `kernels.tuning.SLICE_BYTES` set
  beyond any width and size on the old side do exactly what the code before the slices did),
  so `--rev` is not read. `--model sage` takes a whole-graph GraphSAGE step instead.

- `zeroing`: the `scatter` epoch (`--model sage`: the GraphSAGE step) with `--rev`'s column
  slices, which scattered into one `np.zeros` output and took the bias in a pass of its own,
  against this tree's, where each slice zeroes its own output rows, scatters, then adds the
  bias to them on its own thread (`--rev`'s `ColumnSlices.scatter`, `CSRView.scatter`,
  `CSRView.t_matmul` and `Structure.matmul` swapped in together). `--width W`: one product
  Â·X + b of that graph's fixed Â with X of W columns instead of the epoch.

- `adam`: a GIN epoch on NCI1 (configs/nci1-gin.yaml: 42 parameters in one group; `--model
  gcn`: Cora's GCN epoch, configs/cora.yaml, two groups of two) with Adam's per-parameter
  update against this tree's flat update of each group (`optim/flat.py`): an in-tree switch
  (`optimizers.flat_group` returning None sends every group per parameter), so `--rev` is
  not read.

- `rows`: the `scatter` epoch (100k SBM, 100 labelled nodes: the backward's gradients are zero
  outside a few rows) with each gradient's nonzero rows found by a pass over it, against this
  tree's, where the cross-entropy records its rows and each op below carries them on
  (`kernels.mark_rows`): an in-tree switch (`mark_rows` recording nothing), so `--rev` is
  not read. `--model sage` takes the whole-graph GraphSAGE step instead.

`--rev` must predate the change; its default (`REVS`) is the last revision before it. Prints the median
step/epoch of each side (after one untimed round), new/old, and whether every loss was
bitwise the same (the training loss, and for gcn the validation loss too).

    python benchmarks/ab_speed.py gat --rev 5fe5376 --nodes 100000 --threads 1 --rounds 6
    python benchmarks/ab_speed.py sampled --rev 5fe5376 --threads 1 --rounds 4
    python benchmarks/ab_speed.py gcn --rev 2f38205 --threads 1 --rounds 8
    python benchmarks/ab_speed.py attention --rev b704e4c --threads 2 --rounds 6
    python benchmarks/ab_speed.py elementwise --rev c1ffb82 --threads 2 --rounds 6
    python benchmarks/ab_speed.py sage --threads 1 --rounds 10
    python benchmarks/ab_speed.py scatter --nodes 100000 --threads 1 --rounds 10
    python benchmarks/ab_speed.py slices --nodes 100000 --threads 2 --rounds 40
    python benchmarks/ab_speed.py slices --model sage --threads 1 --rounds 10
    python benchmarks/ab_speed.py zeroing --nodes 0 --threads 2 --rounds 10
    python benchmarks/ab_speed.py zeroing --nodes 0 --width 16 --threads 2 --rounds 40
    python benchmarks/ab_speed.py adam --model gin --threads 1 --rounds 10
    python benchmarks/ab_speed.py rows --nodes 100000 --threads 1 --rounds 30

The process keeps freed memory for reuse as `mgsparse train` does (`keep_freed_memory`).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mgsparse.kernels.allocator import keep_freed_memory

ROOT = Path(__file__).resolve().parent.parent


def old_module(rev: str, path: str, name: str):
    """`path` as it was at `rev`, imported as module `name`."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gat_sides(rev: str, nodes: int):
    from compare_gat import MgsparseSide
    from floor_gcn import synthetic_graph

    from mgsparse.nn import gat
    from mgsparse.sparse import ops

    old_g = old_module(rev, "mgsparse/sparse/graph.py", "old_graph")
    old_o = old_module(rev, "mgsparse/sparse/ops.py", "old_ops")

    def old_alpha(self, h, A, h_dst=None):  # the scores in the pattern's node-major order
        h_dst = h if h_dst is None else h_dst
        score_src = (h * self.att_src).sum(axis=-1).reshape(-1)
        score_dst = (h_dst * self.att_dst).sum(axis=-1).reshape(-1)
        logits = old_o.Gather.apply(score_dst, A.row) + old_o.Gather.apply(score_src, A.col)
        return old_g.row_softmax(A.with_values(logits.leaky_relu(self.negative_slope)))

    def use(alpha, kernel):
        gat.GATConv._alpha, ops.sddmm_kernel = alpha, kernel

    graph = synthetic_graph(nodes)
    new = (gat.GATConv._alpha, ops.sddmm_kernel)
    return {"old": (lambda: use(old_alpha, old_o.sddmm_kernel), MgsparseSide(graph, 0).step),
            "new": (lambda: use(*new), MgsparseSide(graph, 0).step)}


def one_swap(module, name: str, old, make_run) -> dict:
    """The two sides of an A/B that differs in `module.name` only: `old` against the current
    value, each side with its own run (model, optimizer) from `make_run()`."""
    new = getattr(module, name)
    return {"old": (lambda: setattr(module, name, old), make_run()),
            "new": (lambda: setattr(module, name, new), make_run())}


def attention_sides(rev: str, nodes: int):
    from compare_gat import MgsparseSide
    from floor_gcn import synthetic_graph

    from mgsparse.sparse import graph as sparse_graph

    old_g = old_module(rev, "mgsparse/sparse/graph.py", "old_graph")
    graph = synthetic_graph(nodes)
    return one_swap(sparse_graph, "AttentionSoftmax", old_g.AttentionSoftmax,
                    lambda: MgsparseSide(graph, 0).step)


def sampled_sides(rev: str, nodes: int):
    from compare_sampled import MgsparseSide, sampled_graph

    from mgsparse.run.tasks import sampled

    old_b = old_module(rev, "mgsparse/nn/block.py", "old_block")
    graph = sampled_graph()
    return one_swap(sampled, "gather_rows", old_b.gather_rows, lambda: MgsparseSide(graph, 0).epoch)


def gcn_epoch(side) -> tuple[float, float]:
    """One epoch of a compare_pyg `MgsparseSide`: (training loss, validation loss)."""
    from mgsparse.run import train_epoch

    model, task = side.model, side.task
    loss, _ = train_epoch(model, side.optimizer, task.batches(model, side.shuffle), None,
                          replay=task.replay(model, training=True))
    return loss, task.evaluate(model).val_loss


def elementwise_sides(rev: str, nodes: int):
    from compare_pyg import MgsparseSide
    from floor_gcn import arxiv_shaped_graph

    from mgsparse.engine import activations, ops

    old_o = old_module(rev, "mgsparse/engine/ops.py", "old_ops")  # the activations were there
    homes = {"Relu": activations, "LeakyRelu": activations, "Elu": activations, "Dropout": ops}
    names = tuple(homes)
    new = [getattr(homes[n], n) for n in names]

    def use(classes):
        for name, cls in zip(names, classes):
            setattr(homes[name], name, cls)

    graph = arxiv_shaped_graph()
    sides = {name: MgsparseSide(graph, 0, False) for name in ("old", "new")}
    return {"old": (lambda: use([getattr(old_o, n) for n in names]),
                    lambda: gcn_epoch(sides["old"])),
            "new": (lambda: use(new), lambda: gcn_epoch(sides["new"]))}


def gcn_sides(rev: str, nodes: int):
    from compare_pyg import MgsparseSide
    from floor_gcn import arxiv_shaped_graph

    from mgsparse import kernels
    from mgsparse.nn import functional, gcn

    old_c = old_module(rev, "mgsparse/nn/gcn.py", "old_gcn")
    old_f = old_module(rev, "mgsparse/nn/functional.py", "old_functional")
    old_p = old_module(rev, "mgsparse/engine/parallel.py", "old_parallel")

    def use(forward, loss, rows):
        gcn.GCNConv.forward, kernels.sparse_rows = forward, rows
        functional.CrossEntropy.forward = staticmethod(loss)

    graph = arxiv_shaped_graph()
    new = (gcn.GCNConv.forward, functional.CrossEntropy.forward, kernels.sparse_rows)
    old = (old_c.GCNConv.forward, old_f.CrossEntropy.forward, old_p.sparse_rows)
    sides = {name: MgsparseSide(graph, 0, False) for name in ("old", "new")}
    return {"old": (lambda: use(*old), lambda: gcn_epoch(sides["old"])),
            "new": (lambda: use(*new), lambda: gcn_epoch(sides["new"]))}


def sage_sides(rev: str, nodes: int):
    from compare_gat import MgsparseSide
    from floor_gcn import synthetic_graph

    from mgsparse import kernels
    old_p = old_module(rev, "mgsparse/engine/parallel.py", "old_parallel")
    graph = synthetic_graph(nodes)
    return one_swap(kernels.rows, "sparse_rows", old_p.sparse_rows,
                    lambda: MgsparseSide(graph, 0, "sage").step)


def _old_spmm_forward(rev: str):
    """`--rev`'s SpMM forward, which multiplied every A by its own CSR in row blocks."""
    return old_module(rev, "mgsparse/sparse/ops.py", "old_sparse_ops").SpMM.forward


def scatter_sides(rev: str, nodes: int):
    """A whole-graph GCN epoch with `--rev`'s SpMM forward against this tree's (a fixed
    symmetric Â on one call: its CSR read as CSC); `nodes` 0 is the arxiv-shaped graph."""
    from compare_pyg import MgsparseSide
    from floor_gcn import arxiv_shaped_graph, synthetic_graph

    from mgsparse.sparse import ops

    def make_run():
        side = MgsparseSide(graph, 0, False)  # every layer on every node
        return lambda: gcn_epoch(side)

    graph = synthetic_graph(nodes) if nodes else arxiv_shaped_graph()
    return one_swap(ops.SpMM, "forward", _old_spmm_forward(rev), make_run)


def slices_sides(rev: str, nodes: int, model: str = "gcn"):
    """The `scatter` epoch (or a GraphSAGE step) with A's column slices (new) or without
    (old): `kernels.tuning.MIN_WIDTH` and `SLICE_BYTES` beyond any width and size send every
    product where it went before them."""
    from floor_gcn import arxiv_shaped_graph, synthetic_graph

    from mgsparse import kernels

    graph = synthetic_graph(nodes) if nodes else arxiv_shaped_graph()

    def make_run():
        if model == "sage":
            from compare_gat import MgsparseSide as StepSide

            side = StepSide(graph, 0, "sage")
            return side.step
        from compare_pyg import MgsparseSide

        side = MgsparseSide(graph, 0, False)
        return lambda: gcn_epoch(side)
    runs = [make_run(), make_run()]
    now = (kernels.tuning.MIN_WIDTH, kernels.tuning.SLICE_BYTES)

    def use(width: int, size: int) -> None:
        kernels.tuning.MIN_WIDTH, kernels.tuning.SLICE_BYTES = width, size
    return {"old": (lambda: use(1 << 62, 1 << 62), runs[0]),
            "new": (lambda: use(*now), runs[1])}


def product_sides(nodes: int, width: int):
    """One product Â·X + b of the GCN operator of `zeroing`'s graph (`nodes` 0: arxiv-shaped)
    with X of `width` columns, Â fixed (its slices and values kept), each side its own Â;
    a run returns the sum of its output, compared bitwise."""
    from floor_gcn import arxiv_shaped_graph, gcn_adjacency, synthetic_graph

    from mgsparse.sparse.structure import Structure

    graph = synthetic_graph(nodes) if nodes else arxiv_shaped_graph()
    adjacency = gcn_adjacency(np.asarray(graph.edge_index)[::-1], graph.num_nodes).tocoo()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((graph.num_nodes, width)).astype(np.float32)
    bias = rng.standard_normal(width).astype(np.float32)

    def make_run():
        s = Structure(np.stack([adjacency.row, adjacency.col]).astype(np.int64),
                      adjacency.shape, canonical=True)
        values = adjacency.data.astype(np.float32)
        return lambda: s.matmul(values, X, constant=True, bias=bias).sum(dtype=np.float64)
    return make_run(), make_run()


def zeroing_sides(rev: str, nodes: int, model: str = "gcn", width: int | None = None):
    """The `slices` epoch (or GraphSAGE step; with `width`, one product Â·X + b) with
    `--rev`'s slices, which left the zeroing and the bias to serial passes over the whole
    output, against this tree's."""
    from mgsparse.kernels import slices
    from mgsparse.sparse import structure

    old_sl = old_module(rev, "mgsparse/sparse/slices.py", "old_slices")
    old_st = old_module(rev, "mgsparse/sparse/structure.py", "old_structure")
    swapped = [(slices.ColumnSlices, "scatter", old_sl.ColumnSlices.scatter),
               (structure.CSRView, "scatter", old_st.CSRView.scatter),
               (structure.CSRView, "t_matmul", old_st.CSRView.t_matmul),
               (structure.Structure, "matmul", old_st.Structure.matmul)]
    now = [getattr(owner, name) for owner, name, _ in swapped]

    def use(functions) -> None:
        for (owner, name, _), fn in zip(swapped, functions):
            setattr(owner, name, fn)
    if width:
        runs = product_sides(nodes, width)
    else:  # both at this tree's slice settings
        runs = tuple(run for _, run in slices_sides(rev, nodes, model).values())
    return {"old": (lambda: use([fn for *_, fn in swapped]), runs[0]),
            "new": (lambda: use(now), runs[1])}


def adam_sides(rev: str, nodes: int, model: str = "gin"):
    """A GIN epoch on NCI1 (or Cora's GCN epoch, `model` "gcn") with Adam's per-parameter
    update (old) or its flat update of each group (new), each side its own run."""
    from mgsparse.config import load_config
    from mgsparse.optim import optimizers
    from mgsparse.run import build_optimizer, make_task, train_epoch
    from mgsparse.run.task import shuffle_generator

    name = "nci1-gin" if model == "gin" else "cora"
    config, flat = load_config(ROOT / "configs" / f"{name}.yaml"), optimizers.flat_group

    def make_run():  # a task per side: a field binds its layers to one model at a time
        task = make_task(config)
        net = task.build_model(np.random.default_rng(0))
        opt, shuffle = build_optimizer(config.optim, net), shuffle_generator(0)
        return lambda: train_epoch(net, opt, task.batches(net, shuffle),
                                   config.train.grad_clip_norm,
                                   replay=task.replay(net, training=True))[0]
    runs = [make_run(), make_run()]
    return {"old": (lambda: setattr(optimizers, "flat_group", lambda *a: None), runs[0]),
            "new": (lambda: setattr(optimizers, "flat_group", flat), runs[1])}


def rows_sides(rev: str, nodes: int, model: str = "gcn"):
    """The `scatter` epoch (`model` "sage": a whole-graph GraphSAGE step) with the gradients'
    nonzero rows recorded by the ops that made them (new) or found by a pass over each
    gradient (old)."""
    from compare_gat import MgsparseSide as StepSide
    from compare_pyg import MgsparseSide
    from floor_gcn import arxiv_shaped_graph, synthetic_graph

    from mgsparse import kernels
    graph = synthetic_graph(nodes) if nodes else arxiv_shaped_graph()

    def make_run():
        if model == "sage":
            return StepSide(graph, 0, "sage").step
        side = MgsparseSide(graph, 0, False)  # every layer on every node
        return lambda: gcn_epoch(side)
    return one_swap(kernels.rows, "mark_rows", lambda g, rows: g, make_run)


SIDES = {"gat": gat_sides, "attention": attention_sides, "sampled": sampled_sides,
         "elementwise": elementwise_sides, "gcn": gcn_sides, "sage": sage_sides,
         "scatter": scatter_sides, "slices": slices_sides, "zeroing": zeroing_sides,
         "adam": adam_sides, "rows": rows_sides}
REVS = {"gat": "5fe5376", "attention": "b704e4c", "sampled": "5fe5376",
        "elementwise": "c1ffb82", "gcn": "2f38205",
        "sage": "1f11607", "scatter": "24f3d39", "slices": "98ad4e1",
        "zeroing": "03130c8", "adam": "03130c8", "rows": "dea53ab"}  # the last revision before each change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", choices=sorted(SIDES))
    parser.add_argument("--rev", help="the earlier revision (default: the one that predates "
                        "the work's change, REVS)")
    parser.add_argument("--nodes", type=int, default=100_000, help="gat, attention and sage")
    parser.add_argument("--model", choices=["gcn", "sage", "gin"], default=None,
                        help="slices, zeroing and rows: gcn | sage (default gcn); adam: "
                        "gin | gcn (default gin)")
    parser.add_argument("--width", type=int, help="zeroing only: one product of this width")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    args.rev = args.rev or REVS[args.work]
    keep_freed_memory()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from compare_sampled import set_threads

    set_threads(args.threads)
    models = {"slices": ("gcn", "sage"), "zeroing": ("gcn", "sage"), "adam": ("gin", "gcn"),
              "rows": ("gcn", "sage")}
    if args.model is not None and args.model not in models.get(args.work, ()):
        parser.error(f"--model {args.model} does not apply to {args.work}")
    if args.width is not None and (args.work != "zeroing" or args.width < 1 or args.model):
        parser.error("--width takes a positive count of columns, for zeroing alone")
    if args.work == "zeroing":
        sides = zeroing_sides(args.rev, args.nodes, args.model or "gcn", args.width)
    elif args.work in models:
        sides = SIDES[args.work](args.rev, args.nodes, args.model or models[args.work][0])
    else:
        sides = SIDES[args.work](args.rev, args.nodes)
    times = {k: [] for k in sides}
    losses = {k: [] for k in sides}
    for r in range(args.rounds + 1):  # round 0 builds the caches: not timed
        for name in (["old", "new"] if r % 2 == 0 else ["new", "old"]):
            use, run = sides[name]
            use()
            t0 = time.perf_counter()
            losses[name].append(run())
            if r:
                times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    old, new = (np.asarray(losses[k], dtype=np.float64) for k in ("old", "new"))
    equal = np.array_equal(old, new)
    print(f"{args.work}, {args.threads} thread(s), {args.rounds} rounds: old ({args.rev}) "
          f"{_ms(med['old'])} ms, new {_ms(med['new'])} ms, new/old {med['new'] / med['old']:.3f}; "
          f"losses bitwise equal: {equal}"
          + ("" if equal else f" (largest relative difference {_rel(old, new):.1e})"))


def _ms(ms: float) -> str:
    """Whole milliseconds from 100 ms up, three significant digits below (a Cora step)."""
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-30)))


if __name__ == "__main__":
    main()
