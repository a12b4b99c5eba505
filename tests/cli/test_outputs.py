"""One rule for every path a command writes (mgsparse/cli/outputs.py): missing folders are
created, and whatever could not be written is refused before any work, in one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CONFIGS, one_line_error

KARATE = CONFIGS / "karate.yaml"
BENCH = ("bench", "--dense-vs-sparse", "--dataset", "karate", "--repeat", "1", "--warmup", "0")
GRADCHECK = ("gradcheck", "--op", "engine.neg")
TRAIN = ("train", KARATE, "--epochs", "2", "--quiet")
# (command, the option naming a file, a file name it accepts)
FILE_OUTPUTS = [(TRAIN, "--plot", "k.png"), (BENCH, "--json", "b.json"),
                (GRADCHECK, "--json", "g.json")]
IDS = ["train-plot", "bench-json", "gradcheck-json"]
READ_ONLY = Path("/sys")  # sysfs: no regular file can be created there, not even by root


def test_train_out_and_plot_into_missing_folders_create_them_and_print_the_summary(cli, tmp_path):
    out, plot = tmp_path / "runs" / "karate", tmp_path / "pictures" / "new" / "k.png"
    result = cli(*TRAIN, "--out", out, "--plot", plot)
    assert result.exit_code == 0, result.output
    assert "test accuracy" in result.stdout  # the summary, after the pictures
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "metrics.json").read_text())["summary"]["status"] == "ok"


@pytest.mark.parametrize("command, option, name", FILE_OUTPUTS, ids=IDS)
def test_every_file_output_into_a_missing_folder_is_created(cli, tmp_path, command, option,
                                                             name):
    path = tmp_path / "missing" / "deeper" / name
    result = cli(*command, option, path)
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 0
    if name.endswith(".json"):
        assert isinstance(json.loads(path.read_text()), dict)


@pytest.mark.parametrize("command, option, name", FILE_OUTPUTS, ids=IDS)
def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(cli, tmp_path,
                                                                           command, option,
                                                                           name):
    """An existing folder where a file is meant, a path below a file, a read-only place: one
    line, exit 2, and nothing else printed (no epoch, no benchmark, no check ran)."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    folder = tmp_path / name  # a folder with the file's name
    folder.mkdir()
    one_line_error(cli(*command, option, folder), 2, f"{option} {folder}: is a folder")
    one_line_error(cli(*command, option, blocker / name), 2,
                   f"{option} {blocker / name}: {blocker} is a file, not a folder")
    if READ_ONLY.is_dir():
        one_line_error(cli(*command, option, READ_ONLY / "mgsparse" / name), 2,
                       f"{option} {READ_ONLY / 'mgsparse' / name}: cannot write into {READ_ONLY}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["file", name])


def test_train_out_that_cannot_be_written_is_refused_before_training(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    one_line_error(cli(*TRAIN, "--out", blocker), 2, f"--out {blocker}: is a file, not a folder")
    if READ_ONLY.is_dir():
        one_line_error(cli(*TRAIN, "--out", READ_ONLY / "run"), 2,
                       f"--out {READ_ONLY / 'run'}: cannot write into {READ_ONLY}")


def test_a_plot_named_like_the_run_folder_is_refused(cli, tmp_path):
    """--out k.png --plot k.png: the folder and the picture cannot share one path."""
    path = tmp_path / "k.png"
    one_line_error(cli(*TRAIN, "--out", path, "--plot", path), 2,
                   f"--plot {path}: --out writes that path too")
    assert not path.exists()


def test_bench_json_and_plot_on_one_path_are_refused(cli, tmp_path):
    path = tmp_path / "sweep.png"
    result = cli("bench", "--dense-vs-sparse", "--dataset", "synthetic", "--scale", "100,200",
                 "--json", path, "--plot", path)
    one_line_error(result, 2, f"--plot {path}: --json writes that path too")


@pytest.mark.parametrize("command, option", [(TRAIN, "--plot"), (BENCH[:1] + (
    "--dense-vs-sparse", "--dataset", "synthetic", "--scale", "100"), "--plot")],
    ids=["train", "bench"])
def test_a_picture_in_an_unknown_format_is_refused_the_same_way(cli, tmp_path, command, option):
    one_line_error(cli(*command, option, tmp_path / "k.jpg"), 2,
                   f"{option} {tmp_path / 'k.jpg'}: must end in .png, .svg, .pdf")


def test_graph_out_follows_the_rule_and_a_failure_leaves_no_folder(cli, tmp_path):
    path = tmp_path / "drawings" / "step.dot"
    result = cli("graph", KARATE, "--out", path, "--format", "dot")
    assert result.exit_code == 0, result.output
    assert path.read_text().startswith("digraph")
    one_line_error(cli("graph", KARATE, "--out", tmp_path, "--format", "dot"), 2,
                   f"--out {tmp_path}: is a folder")
    never = tmp_path / "never" / "deeper" / "step.svg"  # refused by the drawing itself
    one_line_error(cli("graph", KARATE, "--out", never), 2, "names the DOT file")
    assert not (tmp_path / "never").exists()


def test_partition_out_follows_the_rule_before_the_graph_is_loaded(cli, tmp_path):
    """`partition --out` below a file was a raw OSError ("cannot write the output: Not a
    directory", exit 1) after the graph was loaded and split; the rule refuses it first."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    one_line_error(cli("partition", KARATE, "--parts", "2", "--out", blocker / "parts"), 2,
                   f"--out {blocker / 'parts'}: {blocker} is a file, not a folder")
    one_line_error(cli("partition", KARATE, "--parts", "2", "--out", blocker), 2,
                   f"--out {blocker}: is a file, not a folder")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
