"""Do scipy's CSR kernels release the GIL, and what do 1 and 2 threads give on Â·X?

1. GIL: runs scipy's `csr_matvecs` (the kernel behind CSR @ dense) in a thread while the
   main thread counts Python loop iterations. Holding the GIL, the count would be near zero;
   releasing it, the count comes close to that of an idle interval of the same length.
2. Speed: Â·X and Âᵀ·X through mgsparse's row blocks at each thread count, alternating in one
   process, and whether the results are bitwise equal.
3. Memory: a streaming pass (y = 2·x over 64 MB, read and written once, in row blocks on the
   pool) in GB/s at each thread count. Where one core already fills the memory bus, a second
   thread cannot speed up elementwise work (dropout, ReLU, bias adds), only the kernels that
   wait on scattered reads (the SpMM's gathers) or compute (BLAS).
4. Kernels: Â·X at one thread by scipy's CSR kernel (row blocks, each entry added into the
   same output row as the one before) and by Âᵀ's CSR read as CSC (`Structure.matmul` on a
   fixed Â: consecutive entries write different rows), alternating, and whether they agree
   bitwise.
5. Slices: the same at 2 threads, where `Structure.matmul` cuts the CSC read by Â's column
   slices (`mgsparse/kernels/slices.py`, one scatter per thread; for `--features` of at
   least `kernels.tuning.MIN_WIDTH`), against the CSR kernel's row blocks on the pool.

    python benchmarks/threads.py [--nodes 1000000] [--features 16] [--repeat 5]
                                 [--graph synthetic | arxiv-shaped]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np
from floor_gcn import gcn_adjacency, load_graph

from mgsparse import SparseTensor, kernels
from mgsparse.kernels import slices
from mgsparse.sparse import set_num_threads


def count_while(fn) -> tuple[int, float]:
    """Python loop iterations the main thread makes while fn runs in another thread."""
    worker = threading.Thread(target=fn)
    count, t0 = 0, time.perf_counter()
    worker.start()
    while worker.is_alive():
        count += 1
    return count, time.perf_counter() - t0


def count_idle(seconds: float) -> int:
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        count += 1
    return count


def streaming(thread_counts: list[int], repeat: int) -> None:
    """GB/s of y = 2·x over 2^24 float32 (64 MB each way) in 2^20-row blocks on the pool."""
    x = np.ones(1 << 24, dtype=np.float32)
    y = np.empty_like(x)
    blocks = kernels.row_blocks(len(x), 1 << 20)
    for n in thread_counts:
        set_num_threads(n)
        ms = []
        for _ in range(repeat + 1):
            t0 = time.perf_counter()
            kernels.run_blocks(lambda s, e: np.multiply(x[s:e], 2, out=y[s:e]), blocks)
            ms.append(time.perf_counter() - t0)
        print(f"streaming y = 2x, {n} thread(s): {2 * x.nbytes / statistics.median(ms[1:]) / 1e9:.1f} GB/s")


def sparse_products(s, v: np.ndarray, X: np.ndarray, repeat: int, threads: int = 1) -> None:
    """Â·X at `threads` threads: the CSR kernel's row blocks against `Structure.matmul` on a
    fixed Â (the CSC read: one call at one thread, Â's column slices at more)."""
    set_num_threads(threads)
    s.matmul(v, X, constant=True)  # an array's first product takes the CSR kernel; not timed
    path = {0: "row blocks", 1: "CSC kernel"}.get(slices.count(len(X), X), "column slices")
    sides = {"CSR kernel, row blocks": lambda: s.csr().matmul(v, X),
             f"{path}, Structure.matmul": lambda: s.matmul(v, X, constant=True)}
    times, results = {name: [] for name in sides}, {}
    for _ in range(repeat):
        for name, fn in sides.items():
            t0 = time.perf_counter()
            results[name] = fn()
            times[name].append((time.perf_counter() - t0) * 1e3)
    first, second = results.values()
    for name, ms in times.items():
        print(f"Â·X, {threads} thread(s), {name:32}: median {statistics.median(ms):7.2f} ms")
    print(f"  bitwise equal: {first.tobytes() == second.tobytes()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--graph", choices=["synthetic", "arxiv-shaped"], default="synthetic")
    args = parser.parse_args()
    graph = load_graph(args.graph, args.nodes)
    args.nodes = graph.num_nodes
    A = SparseTensor.from_scipy(gcn_adjacency(graph.edge_index, args.nodes))
    s, v = A._structure, A.values.data
    X = np.random.default_rng(0).standard_normal((args.nodes, args.features), dtype=np.float32)

    set_num_threads(1)
    count, seconds = count_while(lambda: s.csr().matmul(v, X))
    idle = count_idle(seconds)
    print(f"GIL: {count:,} loop iterations while the kernel ran {seconds * 1e3:.0f} ms, "
          f"{idle:,} in as long idle ({count / max(idle, 1):.0%}): "
          f"{'released' if count > idle / 4 else 'held'}")

    times = {(n, op): [] for n in args.threads for op in ("A·X", "Aᵀ·X")}
    results = {}
    for _ in range(args.repeat):
        for n in args.threads:
            set_num_threads(n)
            for op, fn in (("A·X", lambda: s.csr().matmul(v, X)),
                           ("Aᵀ·X", lambda: s.transposed().csr().matmul(v, X, True))):
                t0 = time.perf_counter()
                results[n, op] = fn()
                times[n, op].append((time.perf_counter() - t0) * 1e3)
    first = args.threads[0]
    streaming(args.threads, args.repeat)
    for (n, op), ms in times.items():
        same = np.array_equal(results[n, op], results[first, op])
        print(f"{op:5} {n} thread(s): median {statistics.median(ms):7.1f} ms, "
              f"speed-up {statistics.median(times[first, op]) / statistics.median(ms):.2f}x, "
              f"bitwise equal to {first} thread(s): {same}")
    sparse_products(s, v, X, 4 * args.repeat)
    sparse_products(s, v, X, 4 * args.repeat, threads=2)


if __name__ == "__main__":
    main()
