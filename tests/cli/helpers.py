"""Assertions shared by the CLI tests."""

from __future__ import annotations


def one_line_error(result, code: int, *needles: str) -> str:
    """The command exited with `code` and printed exactly one `error:` line holding every needle
    (and no traceback). Returns that line."""
    assert result.exit_code == code, result.output
    text = result.output.strip()
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), text
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
