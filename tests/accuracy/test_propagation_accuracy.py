"""APPNP, SGC (ten seeds) and ChebNet (five) on Cora's public split, through the library as
`mgsparse train` runs them, against the floors of their papers' figures, and the 3-layer GCN
with batch norm and a residual against the 2-layer GCN. Slow: deselect with -m 'not slow'.

GCNII (configs/cora-gcnii.yaml, 64 layers) runs two seeds capped at 300 epochs: its ten
seeds run to their early stop (best epochs 80-920) take 10-25 minutes of one idle core
(docs/models.md, "GCNII's cost"); by epoch 300 every seed measured has passed 84.9%."""

from __future__ import annotations

import pytest

from tests.accuracy.test_planetoid_accuracy import mean_test_accuracy

pytestmark = pytest.mark.slow


def test_appnp_on_cora_over_ten_seeds(mirror_env):
    """PyG's benchmark: 83.3 ± 0.5% (K = 10, α = 0.1, hidden 64)."""
    assert mean_test_accuracy("cora-appnp.yaml", runs=10) >= 0.830


def test_sgc_on_cora_over_ten_seeds(mirror_env):
    """Wu et al. report 81.0% (K = 2), PyG's example 81.9%."""
    assert mean_test_accuracy("cora-sgc.yaml", runs=10) >= 0.810


def test_chebnet_on_cora_over_five_seeds(mirror_env):
    """Kipf & Welling report 81.2% for Chebyshev filters (K = 2); configs/cora-cheb.yaml
    (K = 3, chosen on validation accuracy) gives 83.00% ± 0.42 over ten seeds, 82.96% over
    the five here (~30 s on two cores)."""
    assert mean_test_accuracy("cora-cheb.yaml", runs=5) >= 0.812


def test_gcnii_64_layers_on_cora_in_300_epochs(mirror_env):
    """Chen et al. report 85.5%; the issue's floor is 84.5%. The shipped recipe, epochs capped
    at 300 (seeds 0..3 measured 84.9-85.4% there)."""
    assert mean_test_accuracy("cora-gcnii.yaml", runs=2, sets=("train.epochs=300",)) >= 0.845


def test_a_3_layer_gcn_with_batch_norm_holds_the_2_layer_figure(mirror_env):
    """configs/cora-gcn-deep.yaml: no worse than configs/cora.yaml's 81.6% ± 0.7."""
    assert mean_test_accuracy("cora-gcn-deep.yaml", runs=10) >= 0.816
