"""`python -m mgsparse` runs the command-line tool."""

from mgsparse.cli import main

main()
