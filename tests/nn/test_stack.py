"""The shared model stack: dropout before each layer, an activation between layers (never after
the last), `embed` as the last layer's input, sparse features kept sparse, and the MLP."""

from __future__ import annotations

import numpy as np
import pytest

from mgsparse import SparseTensor, Tensor
from mgsparse.errors import HyperparameterError
from mgsparse.nn.stack import MLP, dropout, get_activation, layer_widths


def test_mlp_shapes_and_layer_count(rng):
    mlp = MLP(2, 16, 2, layers=2, rng=rng)
    assert [lin.weight.shape for lin in mlp.linears] == [(2, 16), (16, 2)]
    assert mlp(Tensor(np.zeros((7, 2), np.float32))).shape == (7, 2)


def test_stack_puts_the_activation_between_layers_only(rng):
    """Two linear layers: logits = relu(x W1 + b1) W2 + b2, negative logits kept (no output
    activation); `embed` returns relu(x W1 + b1), what the last layer reads."""
    mlp = MLP(3, 4, 2, layers=2, rng=rng, dtype=np.float64)
    mlp.linears[1].bias.data[:] = [-50.0, 1.0]  # logit 0 negative for every row
    x = rng.standard_normal((5, 3))
    (w1, b1), (w2, b2) = [(lin.weight.data, lin.bias.data) for lin in mlp.linears]
    hidden = np.maximum(x @ w1 + b1, 0.0)
    out = mlp(Tensor(x)).data
    np.testing.assert_allclose(out, hidden @ w2 + b2, atol=1e-12)
    assert (out[:, 0] < 0).all()
    np.testing.assert_allclose(mlp.embed(Tensor(x)).data, hidden, atol=1e-12)
    assert mlp(Tensor(x)).shape == (5, 2)  # embed left the model whole


def test_dropout_is_drawn_before_every_layer_and_off_in_eval(rng):
    mlp = MLP(3, 4, 2, layers=2, dropout=0.5, rng=rng, dtype=np.float64)
    x = Tensor(np.ones((50, 3)))
    mlp.eval()
    want = mlp(x).data
    np.testing.assert_array_equal(mlp(x).data, want)  # eval: deterministic, no mask drawn
    mlp.train()
    assert not np.allclose(mlp(x).data, want)
    assert mlp.dropout_step == 0  # counted for keyed masks only, their only reader
    keyed = MLP(3, 4, 2, layers=2, dropout=0.5, rng=rng, dtype=np.float64)
    keyed.keyed_masks = True  # as build_model sets it for model.keyed_dropout
    keyed(x)
    keyed.eval()
    keyed(x)
    assert keyed.dropout_step == 1  # one training forward counted, the eval one not


def test_dropout_keeps_sparse_features_sparse(rng):
    x = SparseTensor.from_dense((rng.random((20, 6)) < 0.3) * 1.0)
    out = dropout(x, 0.5, True, rng)
    assert isinstance(out, SparseTensor) and out.nnz == x.nnz
    assert set(np.unique(out.values.data)) <= {0.0, 2.0}  # kept values scaled by 1 / (1 - p)
    assert dropout(x, 0.5, False, rng) is x


def test_unknown_activation_and_bad_sizes_are_one_clear_error():
    assert get_activation("relu")(Tensor(np.array([-1.0, 2.0]))).data.tolist() == [0.0, 2.0]
    with pytest.raises(HyperparameterError, match="unknown activation 'gelu'; known: relu, elu"):
        get_activation("gelu")
    assert layer_widths(5, 8, 3, 3) == [5, 8, 8, 3]
    with pytest.raises(HyperparameterError, match="model sizes and layer count must be positive"):
        layer_widths(5, 8, 3, 0)


# ---------------------------------------------------------------- residual, jk, norm


def _linears(mlp):
    return [(lin.weight.data, lin.bias.data) for lin in mlp.linears]


@pytest.mark.parametrize("jk", ["cat", "max", "sum"])
def test_jumping_knowledge_drops_each_layer_output_as_pyg_basic_gnn(rng, monkeypatch, jk):
    """PyG's BasicGNN: h_i = dropout(act(layer_i(h_{i-1}))), every h_i (the last one's too) is
    what the next layer and the jump read, and the Linear reads the jump directly. A
    recording stand-in for dropout scales its k-th input by k + 2, so each mask is visible."""
    from mgsparse.nn import stack

    calls: list[int] = []

    def scaled(x, p, training, rng, buffers=None):
        calls.append(len(calls))
        return x * float(len(calls) + 1)

    monkeypatch.setattr(stack, "dropout", scaled)
    mlp = MLP(3, 4, 2, layers=2, jk=jk, dropout=0.5, rng=rng, dtype=np.float64).train()
    x = rng.standard_normal((5, 3))
    (w1, b1), (w2, b2) = _linears(mlp)
    h1 = 3 * np.maximum(2 * x @ w1 + b1, 0)  # the input's dropout (mgsparse's, as Kipf's), then h1's
    h2 = 4 * np.maximum(h1 @ w2 + b2, 0)
    h = {"cat": np.hstack([h1, h2]), "max": np.maximum(h1, h2), "sum": h1 + h2}[jk]
    out = h @ mlp.jk_linear.weight.data + mlp.jk_linear.bias.data
    np.testing.assert_allclose(mlp(Tensor(x)).data, out, atol=1e-12)
    assert calls == [0, 1, 2]  # input, h1, h2: none after the jump


def test_residual_adds_the_input_where_the_width_is_kept(rng):
    """3 → 4 → 4 → 2: the first layer changes the width (no residual), the second keeps it."""
    mlp = MLP(3, 4, 2, layers=3, residual=True, rng=rng, dtype=np.float64)
    x = rng.standard_normal((5, 3))
    (w1, b1), (w2, b2), (w3, b3) = _linears(mlp)
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0) + h1
    np.testing.assert_allclose(mlp(Tensor(x)).data, h2 @ w3 + b3, atol=1e-12)
    np.testing.assert_allclose(mlp.embed(Tensor(x)).data, h2, atol=1e-12)


@pytest.mark.parametrize("jk", ["cat", "max", "sum"])
def test_jumping_knowledge_combines_every_layer_then_a_linear(rng, jk):
    mlp = MLP(3, 4, 2, layers=2, jk=jk, rng=rng, dtype=np.float64)
    assert [lin.weight.shape for lin in mlp.linears] == [(3, 4), (4, 4)]  # both hidden
    x = rng.standard_normal((5, 3))
    (w1, b1), (w2, b2) = _linears(mlp)
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    h = {"cat": np.hstack([h1, h2]), "max": np.maximum(h1, h2), "sum": h1 + h2}[jk]
    out = h @ mlp.jk_linear.weight.data + mlp.jk_linear.bias.data
    assert mlp.jk_linear.weight.shape == ((8 if jk == "cat" else 4), 2)
    np.testing.assert_allclose(mlp(Tensor(x)).data, out, atol=1e-12)
    np.testing.assert_allclose(mlp.embed(Tensor(x)).data, h, atol=1e-12)


def test_layer_norm_sits_between_layer_and_activation(rng):
    mlp = MLP(3, 4, 2, layers=2, norm="layer", rng=rng, dtype=np.float64)
    x = rng.standard_normal((5, 3))
    (w1, b1), (w2, b2) = _linears(mlp)
    z = x @ w1 + b1
    z = (z - z.mean(1, keepdims=True)) / np.sqrt(z.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(mlp(Tensor(x)).data, np.maximum(z, 0) @ w2 + b2, atol=1e-12)
    assert len(mlp.norms) == 1  # hidden layers only: never the logits


@pytest.mark.parametrize("norm, training", [("batch", True), ("batch", False), ("layer", False)])
def test_a_gcn_with_every_option_passes_gradcheck(rng, norm, training):
    from mgsparse.nn import GCN
    from tests.nn.model_check import model_gradcheck
    from tests.nn.test_gcn import EDGE_INDEX

    model = GCN(3, 4, 2, layers=3, dropout=0.0, activation="tanh", residual=True, jk="cat",
                norm=norm, rng=rng, dtype=np.float64)  # tanh: no kink for differences to straddle
    if norm == "batch":
        model.norms[0].running_var.data[...] = 2.0  # eval reads running statistics
    result = model_gradcheck(model, rng.standard_normal((4, 3)),
                             lambda m, x: m(x, EDGE_INDEX), training=training)
    assert result.passed and len(result.inputs) == 1 + 6 + 6 + 2  # x, convs, norms, jk Linear
    assert result.max_abs_err < 1e-6


@pytest.mark.parametrize("kind", ["GCN", "GAT", "GraphSAGE", "GIN"])
def test_options_on_a_receptive_field_equal_the_whole_graph(rng, kind):
    """Block forms return the targets' rows first: residual and jk read those rows, so a
    field's logits are the whole graph's rows (LayerNorm: no batch statistics)."""
    import mgsparse.nn
    from mgsparse.data.sampler import NeighborSampler
    from mgsparse.nn.block import forward_blocks, gather_rows
    from tests.data.test_sampler import random_digraph

    edges, n = random_digraph(rng), 60
    model = getattr(mgsparse.nn, kind)(5, 4, 3, layers=3, dropout=0.0, residual=True, jk="max",
                                       norm="layer", rng=rng, dtype=np.float64)
    model.eval()
    x = rng.standard_normal((n, 5))
    rows = np.array([3, 17, 42, 0])
    blocks = NeighborSampler(edges, n, [-1] * 3).sample(rows, None).blocks
    field = forward_blocks(model, gather_rows(x, blocks[0].n_id), blocks).data
    whole = model(Tensor(x), edges).data[blocks[-1].n_id[:blocks[-1].num_targets]]
    np.testing.assert_allclose(field, whole, atol=1e-10)


def test_the_options_come_after_the_layers_so_the_first_layer_is_still_decayed(rng):
    from mgsparse.nn import GCN
    from mgsparse.run.build import first_layer_parameters

    model = GCN(3, 4, 2, layers=2, jk="cat", norm="batch", residual=True, rng=rng)
    names = [name for name, _ in model.named_parameters()]
    assert names[:2] == ["convs.0.weight", "convs.0.bias"]
    assert [p.shape for p in first_layer_parameters(model)] == [(3, 4), (4,)]


def test_bad_stack_options_are_one_line_errors(rng):
    with pytest.raises(HyperparameterError, match=r"^unknown jumping knowledge 'mean'; known: "
                                                  r"cat, max, sum$"):
        MLP(3, 4, 2, jk="mean")
    with pytest.raises(HyperparameterError, match=r"^unknown norm 'group'; known: batch, layer$"):
        MLP(3, 4, 2, norm="group")
    with pytest.raises(HyperparameterError, match=r"^jk 'max' needs equal layer widths"):
        MLP(3, 4, 2).stack_options([4, 2], 2, jk="max")
    assert MLP(3, 4, 2, jk="none", norm="none").jk_linear is None  # "none": the plain stack


@pytest.fixture
def applied(monkeypatch) -> list[str]:
    """The name of every op applied from here on, in order (recorded or not)."""
    from mgsparse.engine.tensor import Function

    names: list[str] = []
    real_apply = Function.apply.__func__
    monkeypatch.setattr(Function, "apply", classmethod(
        lambda cls, *a: names.append(cls.__name__) or real_apply(cls, *a)))
    return names


def _trained_step(model, x, *args):
    """(logits, every parameter's gradient) of one training forward and backward."""
    model.train()
    out = model(x, *args)
    out.backward(np.arange(out.size, dtype=out.dtype).reshape(out.shape) % 5 - 2.0)
    return out.data.copy(), [p.grad.copy() for p in model.parameters()]


@pytest.mark.parametrize("layers", [2, 3])
def test_relu_and_the_next_dropout_run_as_one_op_with_the_same_bits(rng, monkeypatch, applied,
                                                                    layers):
    """A hidden ReLU read only by the next dropout is fused with it (`relu_dropout`): the same
    masks from the same generator, the same logits and gradients as the two ops."""
    from mgsparse.nn import GCN
    from mgsparse.nn.stack import StackedModel
    from tests.nn.test_gcn import EDGE_INDEX

    x = Tensor(rng.standard_normal((4, 3)).astype(np.float32))
    runs = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(StackedModel, "_relu_feeds_dropout", lambda self: False)
        applied.clear()
        model = GCN(3, 8, 2, layers=layers, dropout=0.5, rng=np.random.default_rng(1))
        runs.append((_trained_step(model, x, EDGE_INDEX), applied.count("ReluDropout")))
    ((fused_out, fused_grads), fused_ops), ((plain_out, plain_grads), plain_ops) = runs
    assert (fused_ops, plain_ops) == (layers - 1, 0)
    assert fused_out.tobytes() == plain_out.tobytes()
    assert [g.tobytes() for g in fused_grads] == [g.tobytes() for g in plain_grads]


@pytest.mark.parametrize("options, fused", [
    ({}, 2), ({"activation": "elu"}, 0), ({"residual": True}, 0), ({"norm": "layer"}, 0),
    ({"jk": "cat"}, 0), ({"dropout": 0.0}, 0), ({"training": False}, 0)])
def test_relu_dropout_is_not_fused_where_something_else_reads_the_activation(
        rng, applied, options, fused):
    """Another activation, a residual, a norm or jumping knowledge keep the two ops apart; no
    dropout (p = 0, or an evaluation pass) leaves no mask to fuse."""
    from mgsparse.nn import GCN
    from tests.nn.test_gcn import EDGE_INDEX

    options = {"dropout": 0.5, **options}
    training = options.pop("training", True)
    model = GCN(3, 8, 2, layers=3, **options, rng=rng).train(training)
    model(Tensor(rng.standard_normal((4, 3)).astype(np.float32)), EDGE_INDEX)
    assert applied.count("ReluDropout") == fused


@pytest.mark.parametrize("widths, fused", [((16, 4, 3), "DropoutLinearOp"), ((3, 8, 2), "Dropout")])
def test_a_gcn_layer_takes_its_input_dropout_and_fuses_it_with_x_w(rng, monkeypatch, applied,
                                                                   widths, fused):
    """The stack leaves a dense input's dropout to GCNConv: W applied first (16 → 4), the
    dropout and x·W are one op; the Â·x side first (3 → 8), the dropout is drawn alone. Either
    way the same mask as the stack's own dropout, so the same logits (to BLAS's rounding of
    the fused product) and gradients."""
    from mgsparse.nn import GCN
    from mgsparse.nn.stack import StackedModel
    from tests.nn.test_gcn import EDGE_INDEX

    x = Tensor(rng.standard_normal((4, widths[0])).astype(np.float32))
    runs = []
    for in_layer in (True, False):
        if not in_layer:
            monkeypatch.setattr(StackedModel, "_layer_drops", lambda self, layer, x: False)
        applied.clear()
        model = GCN(*widths, dropout=0.5, rng=np.random.default_rng(1))
        runs.append((_trained_step(model, x, EDGE_INDEX), list(applied)))
    ((out, grads), ops), ((plain_out, plain_grads), plain_ops) = runs
    other = {"DropoutLinearOp": "Dropout", "Dropout": "DropoutLinearOp"}[fused]
    assert ops.count(fused) == 1 and other not in ops  # the hidden dropout: ReluDropout
    assert plain_ops.count("Dropout") == 1 and "DropoutLinearOp" not in plain_ops
    np.testing.assert_allclose(out, plain_out, rtol=1e-5, atol=1e-6)
    for g, plain in zip(grads, plain_grads):
        np.testing.assert_allclose(g, plain, rtol=1e-4, atol=1e-6)
