"""`python -m mgsparse` runs the command-line tool."""

from mgsparse._entry import main

main()
