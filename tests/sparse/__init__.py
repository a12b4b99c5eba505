"""Tests of mgsparse.sparse (a package so that test basenames may repeat tests/engine's)."""
