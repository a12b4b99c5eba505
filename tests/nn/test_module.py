"""Module: parameter discovery (order, names, sharing), modes, zero_grad, state_dict, repr."""

import numpy as np
import pytest

from mgsparse import Tensor
from mgsparse.errors import MgsparseError, ShapeError
from mgsparse.nn import Dropout, Linear, Module, ModuleList, Parameter, ReLU, Sequential


class Block(Module):
    def __init__(self, rng):
        super().__init__()
        self.scale = Parameter(np.ones(3))
        self.proj = Linear(3, 2, rng=rng)
        self.drop = Dropout(0.5, rng=rng)
        self.note = "not a parameter"
        self.buffer = Tensor(np.zeros(3), requires_grad=True)  # a plain Tensor is no parameter

    def forward(self, x):
        return self.proj(self.drop(x * self.scale))


class Net(Module):
    def __init__(self, rng):
        super().__init__()
        self.first = Block(rng)
        self.heads = [Linear(2, 2, rng=rng), Linear(2, 1, bias=False, rng=rng)]
        self.extra = {"gate": Parameter(np.zeros(1))}
        self.stack = ModuleList([Linear(1, 1, rng=rng)])

    def forward(self, x):
        return self.stack[0](self.heads[1](self.heads[0](self.first(x)))) + self.extra["gate"]


@pytest.fixture
def net():
    return Net(np.random.default_rng(0))


def test_named_parameters_follow_attribute_order_with_dotted_names(net):
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "first.scale", "first.proj.weight", "first.proj.bias",
        "heads.0.weight", "heads.0.bias", "heads.1.weight",
        "extra.gate", "stack.0.weight", "stack.0.bias",
    ]
    assert net.parameters()[1] is net.first.proj.weight
    assert net.num_parameters() == 3 + 6 + 2 + 4 + 2 + 2 + 1 + 1 + 1


def test_shared_parameter_is_reported_once_under_its_first_name():
    lin = Linear(2, 2, rng=np.random.default_rng(0))
    tied = Sequential(lin, ReLU(), lin)
    assert [n for n, _ in tied.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(tied.modules())) == 3  # Sequential, Linear, ReLU


def test_reference_cycle_does_not_recurse_forever():
    a = Linear(2, 2, rng=np.random.default_rng(0))
    outer = Sequential(a)
    a.owner = outer  # a child pointing back at its parent
    assert [n for n, _ in outer.named_parameters()] == ["0.weight", "0.bias"]
    assert [n for n, _ in outer.named_modules()] == ["", "0"]


def test_modules_are_depth_first_and_train_eval_reach_all(net):
    names = [n for n, _ in net.named_modules()]
    assert names == ["", "first", "first.proj", "first.drop", "heads.0", "heads.1", "stack",
                     "stack.0"]
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_parameter_defaults():
    p = Parameter([1.0, 2.0])
    assert p.requires_grad and p.dtype == np.float32
    assert Parameter(np.zeros(2)).dtype == np.float32  # float64 numpy data too
    assert Parameter(np.zeros(2), dtype=np.float64).dtype == np.float64
    assert repr(p) == "Parameter(shape=(2,), dtype=float32)"


def test_zero_grad_sets_every_grad_to_none(net):
    x = Tensor(np.ones((4, 3), dtype=np.float32))
    net.eval()
    net(x).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_is_a_copy_and_round_trips(net):
    state = net.state_dict()
    assert list(state) == [n for n, _ in net.named_parameters()]
    before = state["first.proj.weight"].copy()
    net.first.proj.weight.data += 1.0
    np.testing.assert_array_equal(state["first.proj.weight"], before)  # a copy, not a view

    other = Net(np.random.default_rng(1))
    assert not np.array_equal(other.first.proj.weight.data, net.first.proj.weight.data)
    result = other.load_state_dict(net.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (_, a), (_, b) in zip(net.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data)
        assert a.data is not b.data


def test_load_state_dict_names_missing_and_unexpected_keys(net):
    state = net.state_dict()
    del state["heads.0.bias"]
    state["head.0.bias"] = np.zeros(2)
    with pytest.raises(MgsparseError) as info:
        net.load_state_dict(state)
    assert str(info.value) == ("load_state_dict into Net: missing keys ['heads.0.bias']; "
                               "unexpected keys ['head.0.bias']")


def test_load_state_dict_non_strict_loads_the_rest(net):
    state = {k: np.full(v.shape, 7.0) for k, v in net.state_dict().items()}
    del state["stack.0.bias"]
    state["junk"] = np.zeros(1)
    result = net.load_state_dict(state, strict=False)
    assert result.missing_keys == ["stack.0.bias"] and result.unexpected_keys == ["junk"]
    assert np.all(net.first.proj.weight.data == 7.0)
    assert net.first.proj.weight.dtype == np.float32  # cast to the parameter's dtype


def test_load_state_dict_shape_mismatch_names_key_and_shapes(net):
    state = net.state_dict()
    state["first.proj.weight"] = np.zeros((2, 3))
    with pytest.raises(ShapeError, match=r"shape mismatch for first\.proj\.weight: "
                                         r"checkpoint \(2, 3\) vs model \(3, 2\)"):
        net.load_state_dict(state, strict=False)


def test_sequential_chains_and_indexes():
    rng = np.random.default_rng(0)
    model = Sequential(Linear(3, 4, rng=rng), ReLU(), Linear(4, 2, rng=rng))
    x = Tensor(rng.standard_normal((5, 3)).astype(np.float32))
    expected = model[2](model[1](model[0](x)))
    np.testing.assert_array_equal(model(x).data, expected.data)
    assert len(model) == 3 and model[-1] is model[2]
    head = model[:2]
    assert isinstance(head, Sequential) and len(head) == 2 and head[0] is model[0]
    with pytest.raises(IndexError):
        model[3]


def test_module_list_rejects_non_modules():
    with pytest.raises(MgsparseError, match="ModuleList holds Modules, got int"):
        ModuleList([1])


def test_repr_is_pytorch_like():
    model = Sequential(Linear(3, 4, rng=np.random.default_rng(0)), ReLU(), Dropout(0.25))
    assert repr(model) == (
        "Sequential(\n"
        "  (0): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.25)\n"
        ")"
    )
    nested = Sequential(Sequential(ReLU()))
    assert repr(nested) == "Sequential(\n  (0): Sequential(\n    (0): ReLU()\n  )\n)"


def test_forward_must_be_defined():
    with pytest.raises(NotImplementedError, match="Module does not define forward"):
        Module()(1)


def test_a_parameter_copies_the_array_it_is_given():
    """Issue #12, defect 10: Parameter(float32 array) aliased it, so a step wrote into it."""
    a = np.ones(3, dtype=np.float32)
    p = Parameter(a)
    p.data -= 1.0
    np.testing.assert_array_equal(a, [1.0, 1.0, 1.0])
    t = Tensor(np.ones(2))
    assert Parameter(t, dtype=np.float64).data is not t.data


def test_load_state_dict_between_forward_and_backward_makes_the_backward_fail():
    layer = Linear(2, 1, dtype=np.float64)
    loss = layer(Tensor(np.ones((1, 2)))).sum()
    layer.load_state_dict({"weight": np.zeros((2, 1)), "bias": np.zeros(1)})
    np.testing.assert_array_equal(layer.weight.data, [[0.0], [0.0]])
    with pytest.raises(MgsparseError, match="modified in place after the forward"):
        loss.backward()


def test_modules_walks_in_named_modules_order_each_once():
    rng = np.random.default_rng(0)
    lin = Linear(2, 2, rng=rng)
    inner = Sequential(lin, ReLU())
    outer = Sequential(inner, Linear(2, 2, rng=rng), inner, lin)
    outer.extra = [ReLU(), {"k": lin}]  # containers are looked into one level, as for names
    assert [id(m) for m in outer.modules()] == [id(m) for _, m in outer.named_modules()]
    assert len(list(outer.modules())) == 6  # outer, inner, lin, ReLU, Linear, the listed ReLU
