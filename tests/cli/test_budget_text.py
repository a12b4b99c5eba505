"""Memory figures in the budget's messages are truthful at any scale: a budget of 1e-9 MB
is not "0.0 MB", and an estimate just over its budget never prints as the budget."""

from __future__ import annotations

import re

import pytest

from mgsparse.run.budget import mb
from mgsparse.run.monitor import MB
from tests.conftest import CONFIGS, one_line_error


@pytest.mark.parametrize("num_bytes, text", [
    (0, "0 MB"), (1e-9 * MB, "1.00e-09 MB"), (64, "6.10e-05 MB"), (0.0412 * MB, "0.0412 MB"),
    (2.68 * MB, "2.68 MB"), (34.3 * MB, "34.3 MB"), (2048 * MB, "2,048.0 MB")])
def test_three_significant_digits_at_any_scale(num_bytes, text):
    assert mb(num_bytes) == text


def test_two_figures_compared_never_print_alike():
    assert (mb(1.0004 * MB, 1.0 * MB), mb(1.0 * MB, 1.0004 * MB)) == ("1.0004 MB", "1.0000 MB")
    assert mb(20 * MB, 34.3 * MB) == "20.0 MB"  # already distinct: three digits


def test_a_budget_of_1e_9_mb_names_its_true_size(cli, tmp_path):
    out = tmp_path / "never"
    result = cli("train", CONFIGS / "karate.yaml", "--out", out, "--set",
                 "monitor.memory_budget_mb=1e-9")
    line = one_line_error(result, 1, "with every operand sparse, over the 1.00e-09 MB budget")
    needs = float(re.search(r"needs about ([0-9.e+-]+) MB", line).group(1))
    assert 0.001 < needs < 1  # karate's step: tens of kB, not "0.0"
    assert not out.exists()
