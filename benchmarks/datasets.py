"""Time and peak memory of the synthetic graph generator at a million nodes.

`mgsparse.data.sbm` with 1,000,000 nodes and average degree 10 makes ~5,000,000 undirected
(~10,000,000 directed) edges plus a sparse bag-of-words feature matrix. Wall time is the
median of a few runs without tracing; peak memory comes from one extra run under
`tracemalloc` (numpy reports its buffers to it), which slows that run down, so its time is
not the one quoted. For scale, the result itself holds ``edge_index`` (2 x E int64) and the
CSR features; anything N x N would need 8 TB.

    python benchmarks/datasets.py [--nodes 1000000] [--degree 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from mgsparse.data import sbm


def generate(args: argparse.Namespace):
    return sbm(num_nodes=args.nodes, num_classes=args.classes, avg_degree=args.degree,
               homophily=args.homophily, num_features=args.features, seed=0)


def result_bytes(graph) -> int:
    x = graph.x
    masks = graph.train_mask.nbytes * 3
    return (graph.edge_index.nbytes + graph.y.nbytes + masks
            + x.data.nbytes + x.indices.nbytes + x.indptr.nbytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--degree", type=float, default=10.0)
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--homophily", type=float, default=0.8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        graph = generate(args)
        times.append(time.perf_counter() - start)
        del graph

    tracemalloc.start()
    graph = generate(args)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    homophily = float((graph.y[graph.edge_index[0]] == graph.y[graph.edge_index[1]]).mean())
    mib = 1024 ** 2
    print(f"sbm: {graph.num_nodes:,} nodes, {graph.num_edges:,} directed edges, "
          f"{graph.num_features} features (nnz {graph.x.nnz:,}), {graph.num_classes} classes")
    print(f"edge homophily     {homophily:.4f} (asked {args.homophily})")
    print(f"time (median of {args.repeats}) {statistics.median(times):.2f} s  "
          f"[runs: {', '.join(f'{t:.2f}' for t in times)}]")
    print(f"peak memory        {peak / mib:,.0f} MiB (tracemalloc)")
    print(f"result size        {result_bytes(graph) / mib:,.0f} MiB "
          f"(peak / result = {peak / result_bytes(graph):.1f}x)")


if __name__ == "__main__":
    main()
