"""The console script's first step: load the command line, where a Ctrl-C is a clean exit.

Loading numpy, scipy, typer and rich takes a moment; a Ctrl-C in it would otherwise end in
the interpreter's KeyboardInterrupt traceback. The package root loads nothing heavy, so this
module runs before any of it.
"""

import sys


def main() -> None:
    try:
        from mgsparse.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted while starting\n")
        raise SystemExit(130) from None
    cli_main()
