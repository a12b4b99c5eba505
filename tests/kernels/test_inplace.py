"""`freeze`: an array read-only for good, whatever locks a graph held on it (the rest of the
in-place guard is tested through the ops, in tests/engine/test_tensor.py)."""

import numpy as np
import pytest

from mgsparse.engine import Tensor
from mgsparse.kernels.inplace import freeze


def test_a_frozen_array_stays_read_only_after_its_graph_lets_go():
    """The release makes the other saved arrays writeable again, never the frozen one."""
    fixed = Tensor(np.arange(4.0, dtype=np.float32))
    w = Tensor(np.ones(4, np.float32), requires_grad=True)
    loss = (w * fixed).sum()  # saves fixed's array (and w's): locked while the graph lives
    assert not fixed.data.flags.writeable and not w.data.flags.writeable
    freeze(fixed.data)
    loss.backward()
    assert w.data.flags.writeable  # released as before
    with pytest.raises(ValueError, match="read-only"):
        fixed.data[0] = 1.0


def test_a_locked_view_of_a_frozen_array_is_released_without_error():
    """numpy refuses a writeable view of a read-only base: the release leaves it read-only."""
    base = np.arange(6.0, dtype=np.float32)
    part = Tensor(base[:3])  # a view, saved and locked by the product below
    w = Tensor(np.ones(3, np.float32), requires_grad=True)
    loss = (w * part).sum()
    freeze(base)
    loss.backward()  # releases the view's lock: no error
    assert not part.data.flags.writeable and not base.flags.writeable
    assert w.data.flags.writeable


def test_a_fixed_adjacency_cached_by_the_scatter_path_stays_read_only():
    """Structure.matmul's symmetry answer is kept for the array: after training steps (graphs
    that saved Â and let go) Â's values still refuse a write."""
    from mgsparse import SparseTensor, kernels

    adj = SparseTensor.from_dense(np.array([[0.5, 0.5, 0], [0.5, 0.25, 0.25], [0, 0.25, 0.75]],
                                           dtype=np.float32))
    w = Tensor(np.ones((3, 2), np.float32), requires_grad=True)
    with kernels.num_threads(1):
        for _ in range(3):
            (adj @ (adj @ w)).sum().backward()
    assert adj._structure.csr()._symmetric[1] is True
    with pytest.raises(ValueError, match="read-only"):
        adj.values.data[0] = 1.0


def test_is_frozen_names_only_arrays_that_can_never_change():
    """Read-only is not enough: a graph's lock is lifted again, and a frozen view of a
    writeable base can still change through the base."""
    from mgsparse.kernels.inplace import is_frozen, lock, unlock

    locked = np.ones(3)
    held = lock(locked)
    assert not locked.flags.writeable and not is_frozen(locked)
    unlock(held)
    assert locked.flags.writeable
    base = np.ones(4)
    view = base[:2]
    freeze(view)
    assert not is_frozen(view)
    fixed = np.ones(3)
    freeze(fixed)
    assert is_frozen(fixed) and not is_frozen(fixed.copy())
