"""Messages that point at the fix: one close-match suggester for every unknown name, the flag
the user typed named in a refusal, install hints that work, ranges that name their key."""

from __future__ import annotations

import pytest

from mgsparse.catalog import DATASETS, MODEL_KINDS
from tests.conftest import CONFIGS, one_line_error

KARATE = CONFIGS / "karate.yaml"


# --- one suggester ------------------------------------------------------------------------------

@pytest.mark.parametrize("typed, meant", [
    ("gcm", "gcn"), ("gccn", "gcn"), ("gta", "gat"), ("GIN", "gin"), ("chebb", "cheb"),
    ("sgcc", "sgc"), ("apnp", "appnp"), ("xyz", None)])
def test_the_suggester_prefers_one_edit_of_the_typed_length(typed, meant):
    from mgsparse.errors import closest

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
    from mgsparse.errors import closest

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


# --- ranges that name their key ---------------------------------------------------------------

def test_a_huge_gcnii_theta_is_refused_naming_the_key(cli):
    """θ = 1e308 made β_1 = log(θ + 1) = 709 and the run diverged, with a hint to set the grad
    clip the config already set."""
    one_line_error(cli("train", KARATE, "--set", "model.kind=gcnii", "--set",
                       "model.theta=1e308"), 2,
                   "--set model.theta=1e308: model.theta must be in (0, 10] (got 1e+308)")


@pytest.mark.parametrize("clip, theta, hint", [
    (1.0, 0.5, "try a lower optim.lr"),
    (None, 0.5, "try a lower optim.lr or a train.grad_clip_norm"),
    (1.0, 8.0, "try a lower optim.lr or model.theta (now 8)"),
])
def test_a_divergence_suggests_only_settings_that_can_help(clip, theta, hint):
    from mgsparse.run import fit, make_task
    from tests.conftest import make_config

    config = make_config(model={"kind": "gcnii", "layers": 4, "theta": theta},
                         optim={"lr": 1e30}, train={"epochs": 10, "grad_clip_norm": clip})
    (run,) = fit(config, make_task(config)).runs
    assert run.status == "diverged"
    assert run.message.endswith(f"; {hint}"), run.message


def test_a_neg_ratio_past_the_cap_names_the_key_in_a_file(cli, tmp_path):
    path = tmp_path / "link.yaml"
    path.write_text("task: link\ndataset:\n  name: karate\nlink:\n  neg_ratio: 1e9\n")
    one_line_error(cli("train", path), 2, f"{path}:5: link.neg_ratio must be <= 1000")


# --- the small print --------------------------------------------------------------------------

def test_a_failed_download_on_a_pipe_has_no_blank_line_before_its_error(cli, tmp_path,
                                                                         monkeypatch):
    """The transient download bar, stopped on a pipe or log file, left an empty line in front
    of the error of a download that had moved bytes (a checksum mismatch, a refused parse)."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "ind.cora.x").write_bytes(b"junk!")
    monkeypatch.setenv("MGSPARSE_DATA", str(tmp_path / "data"))
    result = cli("datasets", "download", "cora", "--url", mirror)
    assert result.exit_code == 1
    assert result.output.startswith("error: ind.cora.x from "), repr(result.output)
    assert result.output.count("\n") == 1 and "expected" in result.output


def test_gradcheck_counts_take_their_plural():
    from mgsparse.checks import CheckReport, run_checks
    from mgsparse.cli.render_checks import gradcheck_lines

    one = CheckReport(run_checks(["nn.linear"]), seed=0, size="small", seconds=0.0)
    assert "all 2 checks of 1 op passed" in gradcheck_lines(one)[-1]


def test_the_graphviz_hint_nests_no_parentheses(tmp_path, monkeypatch):
    from mgsparse.run import draw
    from tests.conftest import make_config

    monkeypatch.setattr(draw.shutil, "which", lambda name: None)
    drawing = draw.draw_step(make_config(train={"epochs": 1}), tmp_path / "step.dot", "svg")
    (note,) = drawing.notes
    assert "(apt-get install graphviz, or brew install graphviz on macOS)" in note
    inside = note[note.index("(") + 1:note.index(")")]
    assert "(" not in inside


# --- partition: METIS or say so -------------------------------------------------------------

def test_partition_without_pymetis_warns_of_the_contiguous_fallback(cli, tmp_path,
                                                                     monkeypatch):
    """The fallback to contiguous blocks was told only by the table's caption "(contiguous)"."""
    import json
    import sys

    monkeypatch.setitem(sys.modules, "pymetis", None)  # import pymetis -> ImportError
    result = cli("partition", KARATE, "--parts", 2, "--out", tmp_path / "parts")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    expected = ("warning: pymetis is not installed, so the 2 parts are contiguous blocks of "
                "node ids, with a larger edge cut than METIS's: pip install pymetis (or pip "
                "install -e '.[distributed]' in the mgsparse checkout); --method contiguous "
                "chooses blocks (no warning), --method metis refuses to fall back")
    assert warned == [expected], result.stderr
    assert json.loads((tmp_path / "parts" / "manifest.json").read_text())["method"] == "contiguous"
    chosen = cli("partition", KARATE, "--parts", 2, "--out", tmp_path / "blocks", "--method",
                 "contiguous")
    assert chosen.exit_code == 0 and "warning" not in chosen.stderr
    one_line_error(cli("partition", KARATE, "--parts", 2, "--out", tmp_path / "strict",
                       "--method", "metis"), 2,
                   "--method metis needs pymetis, which is not installed: pip install pymetis")
    assert not (tmp_path / "strict").exists()


def test_partition_with_pymetis_uses_it_without_a_word(cli, tmp_path):
    pytest.importorskip("pymetis")
    result = cli("partition", KARATE, "--parts", 2, "--out", tmp_path / "parts")
    assert result.exit_code == 0 and "warning" not in result.stderr
    assert "(metis)" in result.stdout
