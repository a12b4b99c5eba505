"""The processed-graph cache: a file whose digest holds but whose sparse arrays point
outside their shape (crafted, not corrupted) is treated as damaged and rebuilt, never handed
to scipy."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.data import synthetic
from mgsparse.data.cache import cached_graph, digest, graph_arrays, save_arrays


def _recrafted(path, **changes):
    """Rewrite the cache with `changes` and a digest that matches them."""
    with np.load(path) as z:
        key = str(z["key"])
        arrays = {k: z[k] for k in z.files if k not in ("key", "digest")}
    arrays.update(changes)
    np.savez(path, key=key, digest=digest(arrays), **arrays)


@pytest.mark.parametrize("array, index", [("x_indices", 10**7), ("edge_index", 10**7),
                                          ("x_indices", -1)])
def test_a_cache_indexing_outside_its_shape_is_rebuilt(tmp_path, array, index):
    graph = synthetic.sbm(200, num_classes=2, avg_degree=4, num_features=16, seed=1)
    assert graph.is_sparse
    path = tmp_path / "g.npz"
    save_arrays(graph_arrays(graph), path, "k1")
    assert cached_graph(path, "k1", "g", lambda: pytest.fail("a sound cache is read")).num_nodes
    with np.load(path) as z:
        crafted = z[array].copy()
    crafted.flat[3] = index
    _recrafted(path, **{array: crafted})
    built = []  # refused before scipy indexes with it, and rebuilt
    again = cached_graph(path, "k1", "g", lambda: built.append(1) or graph)
    assert built == [1] and again is graph
    reread = cached_graph(path, "k1", "g", lambda: pytest.fail("the rebuilt cache is read"))
    np.testing.assert_array_equal(reread.edge_index, graph.edge_index)
