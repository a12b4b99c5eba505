"""Writes the two-community example graph beside this script (run once; the files are committed).

60 nodes in two communities of 30 (nodes 0-29: class 0, 30-59: class 1). Each pair inside a
community is linked with probability 0.15, each pair across with 0.02; every edge is written
once (source < target), so a config reads it with ``directed: false``. Features are 4 numbers
per node: two whose mean depends on the class (+-0.5, noise 1.0: weak alone, so the graph
helps) and two of pure noise. Split: 4 training nodes per class, 12 validation, 40 test.

    python configs/examples/two-communities/generate.py
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
NODES, P_IN, P_OUT, SEED = 60, 0.15, 0.02, 7


def main() -> None:
    rng = np.random.default_rng(SEED)
    y = np.repeat([0, 1], NODES // 2)
    same = y[:, None] == y[None, :]
    upper = np.triu(rng.random((NODES, NODES)) < np.where(same, P_IN, P_OUT), k=1)
    source, target = np.nonzero(upper)
    signal = (y[:, None] - 0.5) + rng.normal(0.0, 1.0, (NODES, 2))
    x = np.hstack([signal, rng.normal(0.0, 1.0, (NODES, 2))])
    train = np.concatenate([rng.choice(np.flatnonzero(y == c), 4, replace=False) for c in (0, 1)])
    rest = rng.permutation(np.setdiff1d(np.arange(NODES), train))
    np.savetxt(HERE / "edges.csv", np.column_stack([source, target]), fmt="%d", delimiter=",",
               header="source,target (undirected: each edge once)")
    np.savetxt(HERE / "features.csv", x, fmt="%.2f", delimiter=",",
               header="4 features per node, node 0 first")
    np.savetxt(HERE / "labels.csv", y, fmt="%d", header="class of each node, node 0 first")
    for name, nodes in (("train", train), ("val", rest[:12]), ("test", rest[12:52])):
        np.savetxt(HERE / f"{name}.csv", np.sort(nodes), fmt="%d", header=f"{name} nodes")


if __name__ == "__main__":
    main()
