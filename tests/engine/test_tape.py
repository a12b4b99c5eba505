"""Tapes: a recorded step run again gives the eager step's bits, draws fresh masks, and two
recordings are one program only when nothing between their ops differs."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse.engine import Tensor, no_grad
from mgsparse.engine.tape import Tape, recording
from mgsparse.errors import MgsparseError
from mgsparse.kernels.buffers import Buffers
from mgsparse.nn.module import Parameter


class Net:
    """Two layers with a fused ReLU-dropout between them and a dropout before the first: the
    ops a stacked model records, with a reused output buffer and a lifted number."""

    def __init__(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.x = Tensor(rng.standard_normal((30, 6)), dtype=np.float32)
        self.w1 = Parameter(rng.standard_normal((6, 8)))
        self.w2 = Parameter(rng.standard_normal((8, 3)))
        self.rng, self.buffers = np.random.default_rng(seed + 1), Buffers()

    def params(self) -> list[Parameter]:
        return [self.w1, self.w2]

    def loss(self, scale: float = 0.5) -> Tensor:
        h = self.x.dropout(0.5, True, self.rng, self.buffers) @ self.w1
        h = h.relu_dropout(0.5, True, self.rng, self.buffers) @ self.w2
        return (h * h).sum() * scale  # `* scale`: a number lifted to a new leaf every call


def grads(net: Net) -> list[np.ndarray]:
    out = [p.grad.copy() for p in net.params()]
    for p in net.params():
        p.grad = None
    return out


def record(net: Net, **kwargs) -> tuple[Tape | None, Tensor]:
    with recording() as ops:
        loss = net.loss(**kwargs)
    return Tape.of(ops, loss, backward=True), loss


def test_a_tape_run_gives_the_eager_steps_bits_with_fresh_masks():
    net = Net()
    start = net.rng.bit_generator.state
    eager = net.loss()
    eager.backward()
    want = grads(net)
    net.rng.bit_generator.state = start
    tape, recorded = record(net)
    recorded.backward()
    assert all(np.array_equal(a, b) for a, b in zip(grads(net), want))
    net.rng.bit_generator.state = start  # the tape draws its masks from the same generator
    out = tape.run()
    assert out.data == eager.data and out.data.dtype == np.float32
    assert all(np.array_equal(a, b) for a, b in zip(grads(net), want))
    again = tape.run()  # the generator moved on: new masks, another loss
    assert again.data != eager.data
    assert not np.array_equal(net.w1.grad, want[0])


def test_a_tape_reads_the_parameters_values_of_its_run():
    net = Net()
    tape, recorded = record(net)
    recorded.backward()
    grads(net)
    net.w2.data *= 2  # values change between runs; the program does not
    start = net.rng.bit_generator.state
    out = tape.run()
    got = grads(net)
    net.rng.bit_generator.state = start
    eager = net.loss()
    eager.backward()
    assert out.data == eager.data
    assert all(np.array_equal(a, b) for a, b in zip(got, grads(net)))


def test_gradients_add_into_a_leaf_that_already_has_one_as_eager_backward_does():
    net = Net()
    tape, recorded = record(net)
    recorded.backward()  # w1.grad, w2.grad now hold one step's gradients
    first = [p.grad.copy() for p in net.params()]
    start = net.rng.bit_generator.state
    tape.run()
    replayed = grads(net)
    for p, g in zip(net.params(), first):
        p.grad = g
    net.rng.bit_generator.state = start
    net.loss().backward()  # eager: the same second step on top of the first
    assert all(np.array_equal(a, b) for a, b in zip(replayed, grads(net)))
    assert not np.array_equal(replayed[0], first[0])


def test_two_recordings_of_the_same_code_are_one_program():
    net = Net()
    first, second = record(net)[0], record(net)[0]
    assert first.same_as(second) and second.same_as(first)


@pytest.mark.parametrize("change", ["number", "leaf", "parameter"])
def test_a_recording_that_differs_between_its_ops_is_another_program(change):
    net = Net()
    first = record(net)[0]
    if change == "number":
        other = record(net, scale=0.25)[0]  # the lifted number differs
    elif change == "leaf":
        net.x = Tensor(net.x.data.copy())  # a new input object: its values could differ
        other = record(net)[0]
    else:
        net.w2 = Parameter(net.w2.data)
        other = record(net)[0]
    assert not first.same_as(other)


def test_slices_and_tuples_of_numbers_are_constants_by_value():
    x = Parameter(np.arange(12.0).reshape(4, 3))

    def rec(stop):
        with recording() as ops:
            out = x[1:stop, (0, 2)].sum()
        return Tape.of(ops, out, backward=True)
    assert rec(3).same_as(rec(3))
    assert not rec(3).same_as(rec(4))


def test_what_a_tape_cannot_hold_gives_none():
    net = Net()
    h = net.x @ net.w1  # an op recorded before the recording
    with recording() as ops:
        loss = (h * h).sum()
    assert Tape.of(ops, loss, backward=True) is None
    with recording() as ops:
        pass
    assert Tape.of(ops, net.w1, backward=True) is None  # the root is no recorded op's output


def test_a_tape_is_no_longer_current_after_a_freeze_or_in_another_grad_mode():
    net = Net()
    tape = record(net)[0]
    assert tape.current()
    with no_grad():
        assert not tape.current()
    net.w1.requires_grad_(False)
    assert not tape.current()
    net.w1.requires_grad_(True)
    net.w2.data = net.w2.data.astype(np.float64)  # eager, the op would refuse mixed dtypes
    assert not tape.current()


def test_a_forward_tape_runs_without_a_backward():
    net = Net()
    with no_grad(), recording() as ops:
        out = net.x @ net.w1
    tape = Tape.of(ops, out, backward=False)
    net.w1.data += 1
    with no_grad():
        again = tape.run()
    np.testing.assert_array_equal(again.data, net.x.data @ net.w1.data)
    assert net.w1.grad is None and not again.requires_grad


def test_recordings_do_not_nest():
    with recording(), pytest.raises(MgsparseError, match="already recording a tape"), \
            recording():
        pass


def test_a_forward_tape_lets_each_output_go_after_its_last_reader():
    """Peak memory: a chain of ops holds two outputs at a time, eager or from a tape (not
    every output until the end: a scoring pass on a large graph would double its peak)."""
    import tracemalloc

    x = Tensor(np.ones((1000, 1000)), dtype=np.float32)  # 4 MB an output

    def chain() -> Tensor:
        y = x
        for _ in range(6):
            y = y * 1.5
        return y

    def peak(run) -> int:
        tracemalloc.start()
        try:
            run()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    with no_grad():
        with recording() as ops:
            chain()
        tape = Tape.of(ops, ops[-1][2], backward=False)
        del ops
        eager, replayed = peak(chain), peak(tape.run)
    assert replayed < 3 * x.data.nbytes and replayed <= eager + x.data.nbytes // 2
