"""Distributed GCN under `mpiexec -n K` equals single-process training; a dead, hung or
signalled rank ends the whole job. Skipped without mpi4py (the checkout's `[distributed]` extra)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest

if os.environ.get("MGSPARSE_REQUIRE_MPI") == "1":  # CI: a missing MPI is a failure, not a skip
    import mpi4py  # noqa: F401
else:
    pytest.importorskip("mpi4py")

from mgsparse.config import load_config
from mgsparse.distributed import partition_graph
from mgsparse.run.build import build_optimizer
from mgsparse.run.loop import train_epoch
from mgsparse.run.placed import load_graph
from mgsparse.run.task import shuffle_generator
from mgsparse.run.tasks.nodes import GraphTask
from tests.distributed.conftest import SMALL

# real subprocesses of 1-7 s each: the whole suite runs them, `-m 'not slow'` does not
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
MPIEXEC = shutil.which("mpiexec", path=f"{Path(sys.executable).parent}{os.pathsep}"
                       f"{os.environ.get('PATH', '')}")
if MPIEXEC is None:
    if os.environ.get("MGSPARSE_REQUIRE_MPI") == "1":
        raise RuntimeError("mpiexec not found next to the interpreter (pip install mpich)")
    pytest.skip("mpiexec not found (pip install mpich)", allow_module_level=True)

# keyed dropout: the masks a partitioned run draws (by global node id), in one process too
CORA = ["train.epochs=200", "monitor.memory=false", "model.keyed_dropout=true"]


def launch(ranks: int, config: str, parts: Path, out: Path, sets: list[str],
           *extra: str, launcher: tuple[str, ...] = ()) -> subprocess.Popen:
    cmd = [MPIEXEC, *launcher, "-n", str(ranks), sys.executable, str(WORKER), config, str(parts),
           str(out), *(a for s in sets for a in ("--set", s)), *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    """(exit code, stdout + stderr) of the whole job, which must end within `timeout`."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"mpiexec still running after {timeout:g} s")
    return proc.returncode, out + err


def single_process(config) -> list[dict]:
    """The reference: the single-process loop's own epoch (`train_epoch` over the task's
    batches) and the task's evaluation, epoch by epoch, without early stopping."""
    task = GraphTask(config, load_graph(config.dataset))
    seed = config.train.seed
    model = task.build_model(np.random.default_rng(seed))
    optimizer = build_optimizer(config.optim, model)
    shuffle, rows = shuffle_generator(seed), []
    for _ in range(config.train.epochs):
        loss, grad_norm = train_epoch(model, optimizer, task.batches(model, shuffle),
                                      config.train.grad_clip_norm)
        rows.append({"loss": loss, "grad_norm": grad_norm,
                     **task.evaluate(model)})
    return rows


@pytest.fixture(scope="module")
def cora(tmp_path_factory):
    """Cora downloaded once from a loopback mirror of the real files, its config, the
    single-process curve, and a folder for partitions (the suite's mirror fixtures are
    function-scoped; this module shares one download)."""
    from tests.conftest import require_real_data, serve

    folder = str(require_real_data())
    handler = functools.partial(QuietHandler, directory=folder)
    with serve(handler) as url:
        config = load_config(REPO / "configs" / "cora.yaml",
                             [*CORA, f"dataset.url={url}",
                              f"dataset.root={tmp_path_factory.mktemp('datasets')}"])
        load_graph(config.dataset)  # download while the mirror runs; later loads hit the cache
    return config, single_process(config), tmp_path_factory.mktemp("cora-parts")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def run_parts(cora, ranks: int) -> dict:
    config, _, folder = cora
    graph = load_graph(config.dataset)
    parts = folder / f"k{ranks}"
    manifest = partition_graph(config, graph, ranks, parts)
    assert manifest["num_parts"] == ranks and sum(manifest["nodes_per_part"]) == 2708
    out = folder / f"out{ranks}.json"
    code, err = finish(launch(ranks, str(REPO / "configs" / "cora.yaml"), parts, out,
                              CORA), timeout=240)
    assert code == 0, err
    return {**json.loads(out.read_text()), "manifest": manifest}


def assert_same_curve(rows: list[dict], reference: list[dict]) -> None:
    assert len(rows) == len(reference)
    for key in ("loss", "val_loss", "grad_norm"):
        got, want = np.array([r[key] for r in rows]), np.array([r[key] for r in reference])
        assert np.abs(got - want).max() <= 1e-5, key
    for key in ("train_acc", "val_acc", "test_acc"):
        assert [r[key] for r in rows] == pytest.approx([r[key] for r in reference], abs=1e-9)


def test_two_ranks_reproduce_single_process_cora(cora):
    result = run_parts(cora, 2)
    assert_same_curve(result["rows"], cora[1])
    assert result["rows"][-1]["test_acc"] > 0.7
    # the bytes that moved are the manifest's estimate (3 exchanges a layer: forward,
    # backward, evaluation), plus the one evaluation of the best parameters at the end
    epochs, per_epoch = len(result["rows"]), result["manifest"]["bytes_per_epoch"]
    assert sum(result["bytes_sent"]) == per_epoch * epochs + per_epoch // 3


def test_mgsparse_train_over_two_ranks_gives_the_single_process_curve(cora, tmp_path):
    """The commands a user types: `mgsparse partition`, then `mpiexec -n 2 mgsparse train
    --partitions`, against `mgsparse train` in one process; each writes metrics.json."""
    config, _, _ = cora
    sets = [*CORA, "train.patience=null", f"dataset.url={config.dataset.url}",
            f"dataset.root={config.dataset.root}"]
    flags = [a for s in sets for a in ("--set", s)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "mgsparse"]
    cora_yaml, parts = str(REPO / "configs" / "cora.yaml"), tmp_path / "parts"
    subprocess.run([*cli, "partition", cora_yaml, "--parts", "2", "--out", str(parts), *flags],
                   env=env, check=True, capture_output=True, timeout=120)
    single = subprocess.Popen([*cli, "train", cora_yaml, "-q", "--out", str(tmp_path / "one"),
                               *flags], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    two = subprocess.Popen([MPIEXEC, "-n", "2", *cli, "train", cora_yaml, "-q", "--partitions",
                            str(parts), "--out", str(tmp_path / "two"), *flags], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for proc in (single, two):
        code, text = finish(proc, timeout=240)
        assert code == 0, text
    runs = [json.loads((tmp_path / name / "metrics.json").read_text())["runs"][0]
            for name in ("two", "one")]
    assert_same_curve(runs[0]["epochs"], runs[1]["epochs"])
    assert runs[0]["test_acc"] == runs[1]["test_acc"] > 0.7


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 4])
def test_one_and_four_ranks_reproduce_single_process_cora(cora, ranks):
    assert_same_curve(run_parts(cora, ranks)["rows"], cora[1])


# ---------------------------------------------------------------- failures end the job


DEADLINE = re.compile(r"rank 0: DistributedError: rank 0/2: (the halo exchange \(Alltoallv\)|"
                      r"Allreduce \((sum|max)\)) had no answer from the other ranks within 3 s "
                      r"\(a rank died or hangs\)")


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while not path.is_file() or not path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{path.name} never appeared: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    return int(path.read_text())


@pytest.mark.parametrize("launcher", [(), ("-disable-auto-cleanup",)],
                         ids=["default", "no-launcher-cleanup"])
def test_a_killed_rank_ends_the_job(small_parts, tmp_path, launcher):
    """mpiexec (hydra) ends the job when a rank dies; without its cleanup, the survivors
    either fail in MPI or time out at their deadline and abort the job themselves."""
    out = tmp_path / "out.json"
    proc = launch(2, "configs/synthetic.yaml", small_parts, out,
                  [*SMALL, "train.epochs=100000"], "--timeout", "3", launcher=launcher)
    os.kill(wait_for(Path(f"{out}.rank1.pid"), proc), signal.SIGKILL)
    code, text = finish(proc, timeout=40)  # waits for every rank: they hold the pipes
    assert code != 0 and not out.exists()
    ours = DEADLINE
    # either the launcher reports the death, or the survivor's deadline does
    assert "Killed (signal 9)" in text or ours.search(text), text
    if "rank 0:" in text:
        assert ours.search(text), text


def test_a_hung_rank_makes_the_others_fail_at_the_deadline(small_parts, tmp_path):
    out = tmp_path / "out.json"
    start = time.monotonic()
    proc = launch(2, "configs/synthetic.yaml", small_parts, out, [*SMALL, "train.epochs=50"],
                  "--timeout", "3", "--hang-rank", "1", "--hang-epoch", "3")
    code, err = finish(proc, timeout=60)
    assert code != 0 and not out.exists()
    assert DEADLINE.search(err), err  # wherever rank 0 was waiting for rank 1
    assert time.monotonic() - start < 45


@pytest.mark.parametrize("target", ["SIGTERM to rank 1", "Ctrl-C to mpiexec"])
def test_a_signal_stops_all_ranks_cleanly(small_parts, tmp_path, target):
    """SIGTERM on one rank, or Ctrl-C on mpiexec (which forwards it): every rank leaves
    after the same epoch and rank 0 still writes the results."""
    out = tmp_path / "out.json"
    proc = launch(2, "configs/synthetic.yaml", small_parts, out,
                  [*SMALL, "train.epochs=100000"], "--timeout", "20")
    rank1 = wait_for(Path(f"{out}.rank1.pid"), proc)
    if target.startswith("SIGTERM"):
        os.kill(rank1, signal.SIGTERM)
    else:
        os.kill(proc.pid, signal.SIGINT)
    code, text = finish(proc, timeout=60)
    assert code == 0, text
    result = json.loads(out.read_text())
    assert result["interrupted"] and 1 <= len(result["rows"]) < 100000
