"""The kinds of run, one small file each; `mgsparse.run.kinds.make_task` chooses between them.

- `nodes`: node classification on one placed graph, full batch or on receptive fields;
- `sampled`: the same on neighbour-sampled mini-batches;
- `partitioned`: full batch over MPI, one part of the graph per rank;
- `points`: an MLP on a 2-D point cloud.

Each task holds its data placed (`mgsparse.run.placed.PlacedGraph`) rather than inheriting
it: the memory budget talks to the placed data, the loop to the task.
"""
