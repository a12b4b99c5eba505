"""What partitioned training cannot honour is refused with one line (exit 2), before any rank
trains: another graph's partition, other models, sampled or receptive-field settings, options
of single-process runs. These need no MPI: the checks run before (or without) it."""

from __future__ import annotations

import io
import os
import signal
import time

import numpy as np
import pytest

from mgsparse.config import load_config
from mgsparse.data import synthetic
from mgsparse.data.partition import dataset_identity, read_manifest, write_partitions
from mgsparse.distributed import comm as C
from mgsparse.distributed.train import check_made_from, load_problem
from mgsparse.errors import ConfigError, DataError
from mgsparse.run.tasks.partitioned import check_partitioned
from tests.conftest import CONFIGS, one_line_error
from tests.data.test_partition import gcn_adjacency

SMALL = ["dataset.num_nodes=300", "dataset.num_features=8"]


def synthetic_config(*sets: str):
    return load_config(CONFIGS / "synthetic.yaml", [*SMALL, *sets])


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """A two-part partition of the synthetic config's graph, recording what it was made of."""
    config = synthetic_config()
    graph = synthetic.sbm(300, num_classes=4, avg_degree=10, num_features=8, seed=0)
    root = tmp_path_factory.mktemp("parts")
    write_partitions(graph, gcn_adjacency(graph), 2, root, method="contiguous",
                     made_from=dataset_identity(config.dataset))
    return root


class OneRank:
    """The communicator `load_problem` needs: a rank and a size (it makes no collective)."""

    def __init__(self, size: int = 2):
        self.rank, self.size = 0, size


@pytest.mark.parametrize("sets, needle", [
    (["model.kind=gat"], "partitioned training runs GCN only (model.kind: gcn), not model.kind"),
    (["model.kind=sage"], "not model.kind 'sage'"),
    (["model.kind=appnp"], "not model.kind 'appnp'"),
    (["model.kind=sgc"], "not model.kind 'sgc'"),
    (["model.kind=gcnii"], "not model.kind 'gcnii'"),
    (["model.learn_edge_weight=true"], "model.learn_edge_weight: true rebuilds the whole graph's"),
    (["model.norm=batch"], "model.norm: batch would normalise each rank's rows with that rank's"),
    (["train.batch_size=64"], "train.batch_size: 64 samples mini-batches; partitioned training"),
    (["train.receptive_field=true"], "train.receptive_field: true cannot apply: partitioned"),
    (["train.checkpoint_every=5"], "train.checkpoint_every: 5 writes full checkpoints of one"),
])
def test_settings_a_partitioned_run_cannot_honour_are_refused(sets, needle):
    with pytest.raises(ConfigError) as info:
        check_partitioned(synthetic_config(*sets))
    assert needle in str(info.value) and info.value.exit_code == 2
    check_partitioned(synthetic_config("train.receptive_field=auto"))  # what it can honour


def test_a_partition_of_another_dataset_is_refused_naming_both(parts):
    csv = load_config(CONFIGS / "csv-example.yaml")
    manifest = read_manifest(parts)
    with pytest.raises(ConfigError) as info:
        check_made_from(manifest, csv, parts)
    text = str(info.value)
    ours, theirs = dataset_identity(csv.dataset), manifest["dataset"]
    assert f"{parts / 'manifest.json'} is a partition of dataset 'synthetic' (fingerprint " \
           f"{theirs['fingerprint']}), not of {csv.source}'s dataset 'csv' (fingerprint " \
           f"{ours['fingerprint']})" in text
    assert info.value.exit_code == 2 and "\n" not in text


def test_the_same_dataset_with_other_options_is_refused_naming_the_keys(parts):
    manifest = read_manifest(parts)
    with pytest.raises(ConfigError, match=r"partition of dataset 'synthetic' with "
                                          r"num_nodes=300 .* not of .*'s dataset 'synthetic' "
                                          r"with num_nodes=301"):
        check_made_from(manifest, synthetic_config("dataset.num_nodes=301"), parts)
    # where the data is kept is not what it is
    check_made_from(manifest, synthetic_config("dataset.root=/elsewhere"), parts)


def test_load_problem_checks_ranks_and_graph_before_reading_a_part(parts, tmp_path):
    config = synthetic_config()
    problem = load_problem(parts, OneRank(), config)
    assert problem.part.nodes.size == 150 and problem.totals["train"] > 0
    with pytest.raises(ConfigError, match=r"holds 2 parts but the job has 3 ranks; run with "
                                          r"mpiexec -n 2"):
        load_problem(parts, OneRank(3), config)
    with pytest.raises(ConfigError, match=r"--partitions .*nowhere: no such folder"):
        load_problem(tmp_path / "nowhere", OneRank(), config)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty/manifest\.json: not a finished partition"):
        load_problem(tmp_path / "empty", OneRank(), config)


@pytest.mark.parametrize("option", [["--plot", "p.png"], ["--memory-report"]])
def test_single_process_options_are_refused_with_partitions(cli, parts, tmp_path, option):
    result = cli("train", CONFIGS / "synthetic.yaml", "--partitions", parts, *option,
                 "--set", "monitor.memory=false")
    one_line_error(result, 2, f"{option[0]} is not available with --partitions")
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("config, sets, needle", [
    ("cora-gat.yaml", [], "partitioned training runs GCN only (model.kind: gcn), not model.kind"),
    ("cora-sage.yaml", [], "not model.kind 'sage'"),
    ("cora-appnp.yaml", [], "not model.kind 'appnp'"),
    ("karate.yaml", ["--parts", "40"], "--parts must be in [1, 34] (the graph has 34 nodes)"),
])
def test_mgsparse_partition_refuses_what_no_run_could_train(cli, tmp_path, config, sets,
                                                            needle):
    result = cli("partition", CONFIGS / config, "--out", tmp_path / "parts",
                 *(sets or ["--parts", "2"]))
    one_line_error(result, 2, needle)
    assert not (tmp_path / "parts").exists()


# ---------------------------------------------------------------- errors and signals, one rank


class FakeComm:
    """A two-rank communicator seen from one rank: `abort` and `allreduce` recorded."""

    size, rank = 2, 1

    def __init__(self):
        self.aborted_at: float | None = None

    def abort(self, code: int = 1) -> None:
        self.aborted_at = time.monotonic()

    def allreduce(self, values, op="sum", timeout=None):
        return np.asarray(values, dtype=np.float64)


class RecordingStream(io.StringIO):
    flushed_at: float | None = None

    def flush(self) -> None:
        self.flushed_at = time.monotonic()


def test_a_failing_rank_flushes_its_line_and_waits_before_aborting(monkeypatch):
    """mpiexec tears every process down at MPI_Abort; a line still in a buffer, or not yet
    read by the launcher, was lost in 2 of 25 tries."""
    streams = RecordingStream(), RecordingStream()
    monkeypatch.setattr(C.sys, "stdout", streams[0])
    monkeypatch.setattr(C.sys, "stderr", streams[1])
    comm, said = FakeComm(), []
    with pytest.raises(RuntimeError), C.abort_on_error(comm, lambda e: said.append(str(e))):
        raise RuntimeError("rank 1 failed")
    assert said == ["rank 1 failed"]
    assert all(s.flushed_at is not None for s in streams)
    assert comm.aborted_at - max(s.flushed_at for s in streams) >= C.ABORT_GRACE * 0.9
    comm = FakeComm()
    with pytest.raises(C.JobError), C.abort_on_error(comm):  # agreed by all: no abort
        raise C.JobError("", 2, 1)
    assert comm.aborted_at is None


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_stop_signal_is_remembered_for_the_exit_code(signum, code):
    """SIGTERM to mpiexec reaches every rank as SIGTERM; the run must exit 143, not 130."""
    with C.StopSignals(FakeComm()) as stop:
        assert not stop.should_stop() and stop.signum is None
        os.kill(os.getpid(), signum)
        time.sleep(0.05)
        assert stop.should_stop() and stop.signum == signum
        os.kill(os.getpid(), signal.SIGINT)  # a later Ctrl-C does not hide a SIGTERM
        assert stop.should_stop() and stop.signum == signum
    assert 128 + stop.signum == code


@pytest.mark.parametrize("variable", C.RANK_VARIABLES)
def test_errors_before_mpi_print_on_the_launchers_rank_0_only(monkeypatch, variable):
    for name in C.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    error = ConfigError("bad")
    assert not C.quiet_rank(error)  # no launcher: this process speaks
    monkeypatch.setenv(variable, "1")
    assert C.quiet_rank(error) and not C.quiet_rank(C.JobError("bad", 2, 0))
    monkeypatch.setenv(variable, "0")
    assert not C.quiet_rank(error) and C.quiet_rank(C.JobError("", 2, 1))


def test_an_unexpected_error_names_its_rank():
    assert C.one_line(ValueError("boom\nmore"), 3) == "rank 3: ValueError: boom"
    assert C.one_line(DataError("x.npz: bad"), 3) == "x.npz: bad"
