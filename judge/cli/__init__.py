"""The ``dst-judge`` command line: a thin layer that parses options, calls the library and
prints; one module per command group."""

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
