"""Given a config: train, watch, save, reload.

`make_task(config)` loads and places the data once and decides the kind of run; `fit(config,
task)` runs the one training loop over it; `write_outputs` / `evaluate_saved` save a run
folder and score it again. Nothing here prints: progress goes out through callbacks.
"""

from mgsparse.run.build import build_model, build_optimizer
from mgsparse.run.checkpoint import metrics_dict, output_dir, read_metrics, write_outputs
from mgsparse.run.evaluate import SavedRunScores, evaluate_saved
from mgsparse.run.kinds import make_task
from mgsparse.run.loop import first_step_loss, fit, measure_memory, train_epoch
from mgsparse.run.monitor import EpochMemory, MemoryReport
from mgsparse.run.placed import PlacedGraph, load_graph
from mgsparse.run.results import EpochRow, EpochStats, RunResult, Summary, TrainResult
from mgsparse.run.task import Scores, Task
from mgsparse.run.tasks.nodes import GraphTask
from mgsparse.run.tasks.points import PointTask

__all__ = [
    "EpochMemory", "EpochRow", "EpochStats", "GraphTask", "MemoryReport", "PlacedGraph",
    "PointTask", "RunResult", "SavedRunScores", "Scores", "Summary", "Task", "TrainResult",
    "build_model", "build_optimizer", "evaluate_saved", "first_step_loss", "fit", "load_graph",
    "make_task", "measure_memory", "metrics_dict", "output_dir", "read_metrics", "train_epoch",
    "write_outputs",
]
