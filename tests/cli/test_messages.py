"""Messages that point at the fix: one close-match suggester for every unknown name, the flag
the user typed named in a refusal, install hints that work, ranges that name their key."""

from __future__ import annotations

import pytest

from mgsparse.catalog import DATASETS, MODEL_KINDS
from mgsparse.errors import closest
from tests.conftest import CONFIGS, one_line_error

KARATE = CONFIGS / "karate.yaml"


# --- one suggester ------------------------------------------------------------------------------

@pytest.mark.parametrize("typed, meant", [
    ("gcm", "gcn"), ("gccn", "gcn"), ("gta", "gat"), ("GIN", "gin"), ("chebb", "cheb"),
    ("sgcc", "sgc"), ("apnp", "appnp"), ("xyz", None)])
def test_the_suggester_prefers_one_edit_of_the_typed_length(typed, meant):
    assert closest(typed, MODEL_KINDS) == meant


def test_a_mistyped_model_kind_suggests_gcn_not_sgc(cli):
    one_line_error(cli("train", KARATE, "--set", "model.kind=gcm"), 2,
                   "--set model.kind=gcm: model.kind must be one of", "did you mean 'gcn'?")


def test_a_mistyped_dataset_to_download_suggests_the_name_not_the_list(cli, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path))
    line = one_line_error(cli("datasets", "download", "coraa"), 2,
                          "unknown dataset 'coraa'; did you mean 'cora'?")
    assert "pubmed" not in line
    line = one_line_error(cli("datasets", "info", "nope"), 2, "unknown dataset 'nope'; known:")
    assert all(name in line for name in ("cora", "mutag"))
    assert closest("Mutagg", DATASETS) == "mutag"


def test_an_unknown_gradcheck_op_in_capitals_is_suggested(cli):
    one_line_error(cli("gradcheck", "--op", "SPMM"), 2,
                   "unknown op 'SPMM' (did you mean 'sparse.spmm'?)")


# --- install hints that work ------------------------------------------------------------------

def test_no_message_or_docstring_names_a_package_index_extra():
    """`pip install 'mgsparse[plot]'` asks PyPI for a distribution mgsparse is not (it is
    installed from its checkout), and would install someone else's if one appeared."""
    from tests.conftest import REPO_ROOT

    named = [str(path.relative_to(REPO_ROOT)) for folder in ("mgsparse", "docs")
             for path in sorted((REPO_ROOT / folder).rglob("*.*"))
             if path.suffix in (".py", ".md") and "mgsparse[" in path.read_text()]
    assert named == []


def test_the_distributed_hint_installs_mpi4py(monkeypatch):
    import sys

    from mgsparse.distributed import comm
    from mgsparse.errors import DistributedError

    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(DistributedError, match=r"^distributed training needs mpi4py: pip "
                                               r"install mpi4py mpich \(or pip install -e "
                                               r"'\.\[distributed\]' in the mgsparse "
                                               r"checkout\)$"):
        comm.mpi()


# --- the flag the user typed ------------------------------------------------------------------

@pytest.mark.parametrize("flag, value, needle", [
    ("--epochs", 0, "train.epochs must be >= 1 (got 0)"),
    ("--runs", 0, "train.runs must be >= 1 (got 0)"),
    ("--folds", 1, "train.folds must be >= 2"),
])
def test_a_bad_option_value_names_the_option_typed(cli, flag, value, needle):
    line = one_line_error(cli("train", KARATE, flag, value), 2, f"error: {flag} {value}: {needle}")
    assert "--set" not in line


def test_a_bench_dataset_names_the_option_typed(cli):
    line = one_line_error(cli("bench", "--dense-vs-sparse", "--config", KARATE, "--dataset",
                              "coraa"), 2, "error: --dataset coraa: dataset.name must be one of",
                          "did you mean 'cora'?")
    assert "--set" not in line
