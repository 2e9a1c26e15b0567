"""The `tcpadvise` command: click commands (main.py) over the package's plain functions."""

from .main import cli, main

__all__ = ["cli", "main"]
