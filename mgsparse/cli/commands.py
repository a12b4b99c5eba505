"""Registers every command module on the app (each module adds its commands on import)."""
from mgsparse.cli import datasets  # noqa: E402,F401
from mgsparse.cli import train  # noqa: E402,F401
from mgsparse.cli import bench  # noqa: E402,F401
from mgsparse.cli import graph  # noqa: E402,F401
from mgsparse.cli import gradcheck  # noqa: E402,F401
