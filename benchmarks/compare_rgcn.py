"""An R-GCN layer in mgsparse (`mgsparse.nn.rgcn.RGCNConv`) against PyG's `RGCNConv`, the same
weights on a random typed graph: outputs and gradients equal, and the time of forward+backward.

Both layers compute h_i' = W_0·h_i + Σ_r mean_{j ∈ N_r(i)} W_r·h_j + b with the basis
decomposition W_r = Σ_b a_rb·V_b (PyG's `aggr="mean"` is mgsparse's 1 / c_{i,r}). mgsparse's
weights are copied into PyG's (`weight` = the bases V, `comp` = a, `root` = W_0, `bias`); the
loss is Σ out ∘ G for a fixed random G, so every output entry's gradient is checked. Compared,
in float64: the outputs, and the gradients of x, V, a, W_0 and b (largest absolute difference
over the largest entry). Then in float32, the time of one forward+backward, the two sides
alternating `--repeats` times (median reported; mgsparse's sparse operand M is built once per
graph, as a training run keeps it, and PyG reads its edge_index and edge_type as given), at one
thread (torch.set_num_threads(1), mgsparse.sparse.set_num_threads(1)).

    PYTHONPATH=. python benchmarks/compare_rgcn.py [--nodes 5000] [--edges 50000] \\
        [--relations 20] [--bases 4] [--features 32] [--repeats 20]

Without torch and torch_geometric (pip install 'mgsparse[compare]') it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mgsparse.engine import Tensor
from mgsparse.nn.rgcn import RGCNConv, relation_operand
from mgsparse.sparse import set_num_threads


def frameworks_available() -> bool:
    try:
        import torch  # noqa: F401
        import torch_geometric  # noqa: F401
    except ImportError:
        return False
    return True


def random_graph(args, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """edge_index (2, E), source row 0, target row 1, and an edge type per edge."""
    return (rng.integers(0, args.nodes, (2, args.edges)),
            rng.integers(0, args.relations, args.edges))


class Sides:
    """The two layers holding the same weights, on one graph, in one dtype."""

    def __init__(self, args, dtype, rng: np.random.Generator):
        import torch
        from torch_geometric.nn import RGCNConv as PygRGCNConv

        self.torch = torch
        edges, types = random_graph(args, rng)
        f = args.features
        self.x = rng.normal(size=(args.nodes, f)).astype(dtype)
        self.g = rng.normal(size=(args.nodes, f)).astype(dtype)
        self.mgs = RGCNConv(f, f, args.relations, args.bases, rng=rng, dtype=dtype)
        self.mgs.bias.data[...] = rng.normal(size=f)  # a bias that is not zero
        self.operand = relation_operand(edges, types, args.nodes, args.relations, dtype)
        tdtype = torch.float64 if dtype == np.float64 else torch.float32
        self.pyg = PygRGCNConv(f, f, args.relations, num_bases=args.bases, aggr="mean").to(tdtype)
        with torch.no_grad():
            for theirs, ours in self.pairs():
                theirs.copy_(torch.from_numpy(np.asarray(ours.data)))
        self.edge_index = torch.from_numpy(edges)
        self.edge_type = torch.from_numpy(types)
        self.tx = torch.from_numpy(self.x).requires_grad_(True)
        self.tg = torch.from_numpy(self.g)

    def pairs(self):
        p, m = self.pyg, self.mgs
        return [(p.weight, m.basis), (p.comp, m.coeff), (p.root, m.root), (p.bias, m.bias)]

    def run_mgsparse(self) -> tuple[np.ndarray, list[np.ndarray]]:
        self.mgs.zero_grad()
        x = Tensor(self.x, requires_grad=True)
        out = self.mgs(x, self.operand)
        (out * self.g).sum().backward()
        return out.data, [x.grad] + [ours.grad for _, ours in self.pairs()]

    def run_pyg(self) -> tuple[np.ndarray, list[np.ndarray]]:
        self.pyg.zero_grad()
        self.tx.grad = None
        out = self.pyg(self.tx, self.edge_index, self.edge_type)
        (out * self.tg).sum().backward()
        grads = [self.tx.grad] + [theirs.grad for theirs, _ in self.pairs()]
        return out.detach().numpy(), [g.numpy() for g in grads]


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def check_equal(args) -> bool:
    sides = Sides(args, np.float64, np.random.default_rng(0))
    out_m, grads_m = sides.run_mgsparse()
    out_p, grads_p = sides.run_pyg()
    names = ["output", "grad x", "grad bases V", "grad coefficients a", "grad root W_0",
             "grad bias"]
    diffs = [relative(out_m, out_p)] + [relative(a, b) for a, b in zip(grads_m, grads_p)]
    print("float64, max |mgsparse - PyG| / max |PyG|:")
    for name, d in zip(names, diffs):
        print(f"  {name:22} {d:.2e}")
    ok = max(diffs) < 1e-10
    print(f"  {'equal' if ok else 'NOT equal'} to float64 tolerance (1e-10)")
    return ok


def time_both(args) -> None:
    sides = Sides(args, np.float32, np.random.default_rng(1))
    times = {"mgsparse": [], "pyg": []}
    for _ in range(2):  # warm both
        sides.run_mgsparse()
        sides.run_pyg()
    for _ in range(args.repeats):
        for name, run in (("mgsparse", sides.run_mgsparse), ("pyg", sides.run_pyg)):
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"float32 forward+backward, 1 thread, median of {args.repeats}: mgsparse "
          f"{med['mgsparse'] * 1e3:.2f} ms, PyG RGCNConv {med['pyg'] * 1e3:.2f} ms; "
          f"mgsparse / PyG = {med['mgsparse'] / med['pyg']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--edges", type=int, default=50000)
    parser.add_argument("--relations", type=int, default=20)
    parser.add_argument("--bases", type=int, default=4)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    if not frameworks_available():
        print("compare_rgcn: torch and torch_geometric are not installed "
              "(pip install 'mgsparse[compare]'); nothing to compare")
        return
    import torch
    import torch_geometric

    torch.set_num_threads(1)
    set_num_threads(1)
    print(f"torch {torch.__version__}, torch_geometric {torch_geometric.__version__}; "
          f"{args.nodes:,} nodes, {args.edges:,} edges, {args.relations} relations, "
          f"{args.bases} bases, {args.features} -> {args.features} features")
    ok = check_equal(args)
    time_both(args)
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
