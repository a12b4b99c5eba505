"""The README's table against the peers, measured and written by one command.

Each row of the table is one or more runs of the side-by-side scripts here, each in the
interpreter where its peer installs: PyG and DGL need different torch and numpy versions, so
they usually live in two environments (`--pyg-python`, `--dgl-python`; both default to this
interpreter, which also runs the numpy floors). The scripts append every ratio they print,
through `record_ratio`, to the file named by the environment variable BENCH_RATIOS (one JSON
line each: mgsparse side, peer, threads, both medians, their ratio; nothing when it is
unset). The table is built from those lines only, so the README's figures are the ones the
scripts printed, not copied by hand. A cell shows mgsparse's median over the peer's at
1 · 2 threads; the last column, mgsparse's own gain from the second thread (its 1-thread
median over its 2-thread one), which issue 27 asks to be 1.5× on every whole-graph row,
measured by `thread_gain.py` (`floor_field.py --thread-gain` for Cora): 1- and 2-thread
epochs alternating in one process, not the medians of two stretches of a side-by-side. A
peer that does not install where it is asked for leaves its cell "not measured", never an
old figure.

    python benchmarks/speed_table.py [--pyg-python P] [--dgl-python P] [--rows gat sage]
    python benchmarks/speed_table.py ... --write README.md   # replace the table in place

The README holds the table between the two marker comments `BEGIN`/`END` below; `--write`
replaces what is between them (and the line saying how loaded the machine was), nothing else.
Runs set OMP_WAIT_POLICY=PASSIVE, so that the peers' idle OpenMP threads do not spin while
mgsparse runs, and pass this checkout on PYTHONPATH, so an environment without mgsparse
installed measures this code. They also run without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
(`--keep-openblas-env` keeps them): a host may set them to pin numpy's OpenBLAS to older
kernels (Haswell on an AVX-512 CPU, for OpenBLAS builds older than numpy's), while torch's
MKL picks its kernels by the CPU whatever they say. Unset, each side runs the kernels it
would pick on its own; the table's last line names the one numpy's OpenBLAS ran.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = "BENCH_RATIOS"
HOST_BLAS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # unset for the runs (see the module)
CORE_NAME = """import ctypes, numpy
paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.lower()})
names = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename")
for lib in (ctypes.CDLL(p) for p in paths if p.startswith("/")):
    get = next((getattr(lib, n) for n in names if hasattr(lib, n)), None)
    if get is not None:
        get.restype = ctypes.c_char_p
        print(get().decode())
        break
"""


def record_ratio(peer: str, threads: int, ours_ms: float, peer_ms: float,
           side: str = "mgsparse") -> None:
    """Append one measured ratio (`side`'s median over `peer`'s) to $BENCH_RATIOS, if set."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = {"side": side, "peer": peer, "threads": int(threads), "ours_ms": float(ours_ms),
            "peer_ms": float(peer_ms), "ratio": float(ours_ms) / float(peer_ms)}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def read(path: str | Path) -> list[dict]:
    """Every line `record_ratio` wrote to `path` (none when the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


BEGIN, END = "<!-- speed-table: begin -->", "<!-- speed-table: end -->"


@dataclasses.dataclass(frozen=True)
class Row:
    """One table row: what it measures, the runs that measure it (environment, script
    arguments) and the cells it shows (peer as the scripts record it, mgsparse side)."""
    key: str
    work: str
    runs: tuple[tuple[str, str], ...]
    cells: tuple[tuple[str, str], ...]


ROWS = (
    Row("cora", "GCN epoch, Cora (receptive field)",
        (("pyg", "compare_pyg.py --graph cora --threads 1 2 --epochs 100 --runs 1 --no-memory"),
         ("main", "floor_field.py --epochs 300 --threads 1"),
         ("main", "floor_field.py --epochs 300 --thread-gain")),
        (("PyG", "mgsparse"), ("field floor", "mgsparse"))),
    Row("arxiv", "GCN epoch, ogbn-arxiv-shaped graph (whole graph)",
        (("pyg", ("compare_pyg.py --graph arxiv-shaped --threads 1 2 --epochs 8 --runs 1 "
                  "--no-memory")),
         ("dgl", "compare_dgl_gcn.py --epochs 8 --threads 1 2"),
         ("main", "thread_gain.py gcn --graph arxiv-shaped --rounds 10")),
        (("PyG", "mgsparse"), ("numpy floor", "mgsparse"), ("DGL", "mgsparse"))),
    Row("sbm", "GCN epoch, 100k-node graph, every layer on every node",
        (("pyg", ("compare_pyg.py --graph synthetic --nodes 100000 --threads 1 2 --epochs 10 "
                 "--runs 1 --no-memory")),
         ("main", "thread_gain.py gcn --graph synthetic --nodes 100000 --rounds 30")),
        (("PyG", "mgsparse, whole graph"), ("numpy floor", "mgsparse, whole graph"))),
    Row("gat", "GAT step, 100k-node graph (whole graph)",
        (("pyg", "compare_gat.py --nodes 100000 --steps 4 --threads 1 2"),
         ("dgl", "compare_gat.py --nodes 100000 --steps 4 --threads 1 2"),
         ("main", "thread_gain.py gat --nodes 100000 --rounds 5")),
        (("PyG", "mgsparse"), ("DGL", "mgsparse"))),
    Row("sage", "GraphSAGE step, 100k-node graph (whole graph)",
        (("pyg", "compare_gat.py --model sage --nodes 100000 --steps 6 --threads 1 2"),
         ("dgl", "compare_gat.py --model sage --nodes 100000 --steps 6 --threads 1 2"),
         ("main", "thread_gain.py sage --nodes 100000 --rounds 10")),
        (("PyG", "mgsparse"), ("DGL", "mgsparse"))),
    Row("sampled", "sampled GraphSAGE epoch, 200k nodes",
        (("dgl", "compare_sampled.py --epochs 6 --threads 1 2"),
         ("main", "thread_gain.py sampled --rounds 4")),
        (("DGL", "mgsparse"),)),
    Row("gin", "GIN epoch, NCI1",
        (("pyg", "compare_pyg_graphs.py --epochs 10 --threads 1"),
         ("pyg", "compare_pyg_graphs.py --epochs 10 --threads 2"),
         ("main", "thread_gain.py gin --rounds 6")),
        (("PyG", "mgsparse"), ("numpy floor", "mgsparse"))),
)


def run_env(keep_host_blas: bool) -> dict[str, str]:
    """The environment of every run (see the module)."""
    env = {k: v for k, v in os.environ.items() if keep_host_blas or k not in HOST_BLAS}
    return {**env, "OMP_WAIT_POLICY": "PASSIVE",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent),
                                                        os.environ.get("PYTHONPATH")]))}


def blas_core(python: str, env: dict[str, str]) -> str:
    """The kernel family numpy's OpenBLAS picks under `env` ("Haswell", "SkylakeX", ...)."""
    done = subprocess.run([python, "-c", CORE_NAME], env=env, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "unknown"


def measure(row: Row, pythons: dict[str, str], env: dict[str, str], log) -> list[dict]:
    """Run `row`'s scripts; every ratio they recorded (a failed run records none)."""
    found = []
    with tempfile.TemporaryDirectory() as scratch:
        for venv, command in row.runs:
            out = Path(scratch) / "ratios.jsonl"
            out.unlink(missing_ok=True)
            argv = [pythons[venv], str(HERE / command.split()[0]), *command.split()[1:]]
            log(f"[{row.key}] {venv}: python benchmarks/{command}")
            done = subprocess.run(argv, env={**env, ENV: str(out)}, cwd=HERE.parent,
                                  capture_output=True, text=True, check=False)
            log(done.stdout.rstrip())
            if done.returncode:
                log(f"[{row.key}] exited {done.returncode}: {done.stderr.strip()[-400:]}")
            found += read(out)
    return found


def cell(lines: list[dict], peer: str, side: str) -> str:
    """'PyG 0.337 · 0.245': `side` over `peer` at 1 and 2 threads, in the order measured."""
    ratios = {line["threads"]: line["ratio"] for line in lines
              if line["peer"] == peer and line["side"] == side}
    if not ratios:
        return f"{peer} not measured"
    return f"{peer} " + " · ".join(f"{ratios[t]:.3f}" for t in sorted(ratios))


def thread_gain(lines: list[dict], side: str = "mgsparse") -> str:
    """mgsparse's 1-thread median over its 2-thread one: from `thread_gain.py`'s alternating
    run (peer "1 thread") where there is one, else from the first side-by-side with both."""
    own = [line for line in lines if line["peer"] == "1 thread"]
    if own:
        return f"{own[-1]['peer_ms'] / own[-1]['ours_ms']:.2f}×"
    for peer in dict.fromkeys(line["peer"] for line in lines):
        ms = {line["threads"]: line["ours_ms"] for line in lines
              if line["peer"] == peer and line["side"] == side}
        if 1 in ms and 2 in ms:
            return f"{ms[1] / ms[2]:.2f}×"
    return "–"


def table(measured: dict[str, list[dict]]) -> str:
    header = "| work | mgsparse / peer, 1 thread · 2 threads | mgsparse, 1 → 2 threads | command |"
    lines = [header, "|---|---|---|---|"]
    for row in ROWS:
        if row.key not in measured:
            continue
        got = measured[row.key]
        cells = "; ".join(cell(got, peer, side) for peer, side in row.cells)
        commands = " · ".join(dict.fromkeys(f"`python benchmarks/{c}`" for _, c in row.runs))
        gain = thread_gain(got, row.cells[0][1])
        lines.append(f"| {row.work} | {cells} | {gain} | {commands} |")
    return "\n".join(lines)


def around_markers(path: Path) -> tuple[str, str]:
    """The text of `path` before BEGIN and after END; a one-line exit when it has no such
    pair (checked before measuring, not after minutes of it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SystemExit(f"speed_table: cannot read {path}: {error.strerror}") from None
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"speed_table: {path} needs one {BEGIN} line before one {END} line")
    head, rest = text.split(BEGIN)
    return head, rest.split(END)[1]


def write_between_markers(path: Path, block: str) -> None:
    """Replace what lies between BEGIN and END in `path` with `block`."""
    head, tail = around_markers(path)
    path.write_text(f"{head}{BEGIN}\n{block}\n{END}{tail}", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyg-python", default=sys.executable)
    parser.add_argument("--dgl-python", default=sys.executable)
    parser.add_argument("--rows", nargs="+", choices=[r.key for r in ROWS],
                        default=[r.key for r in ROWS])
    parser.add_argument("--write", type=Path, help="a file with the marker comments (README.md)")
    parser.add_argument("--quiet", action="store_true", help="print the table only")
    parser.add_argument("--keep-openblas-env", action="store_true",
                        help=f"keep {' and '.join(HOST_BLAS)} for the runs")
    args = parser.parse_args()
    pythons = {"main": sys.executable, "pyg": args.pyg_python, "dgl": args.dgl_python}
    for flag, python in (("--pyg-python", args.pyg_python), ("--dgl-python", args.dgl_python)):
        if shutil.which(python) is None:
            parser.error(f"{flag} {python}: no such interpreter")
    if args.write:
        around_markers(args.write)
    log = (lambda _: None) if args.quiet else (lambda text: print(text, flush=True))
    load_before, t0 = os.getloadavg()[0], time.perf_counter()
    env = run_env(args.keep_openblas_env)
    measured = {row.key: measure(row, pythons, env, log) for row in ROWS if row.key in args.rows}
    minutes = (time.perf_counter() - t0) / 60
    unset = "" if args.keep_openblas_env else f" ({' and '.join(HOST_BLAS)} unset)"
    block = (f"{table(measured)}\n\nWritten by `python benchmarks/speed_table.py` in "
             f"{minutes:.0f} min on {time.strftime('%Y-%m-%d')}, load average {load_before:.1f} before and "
             f"{os.getloadavg()[0]:.1f} after; numpy's OpenBLAS ran its "
             f"{blas_core(sys.executable, env)} kernels{unset}.")
    print(block)
    if args.write:
        write_between_markers(args.write, block)


if __name__ == "__main__":
    main()
