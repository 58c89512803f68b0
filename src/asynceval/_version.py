"""The package's version, in one place: the build reads it (pyproject's `tool.hatch.version`),
and modules at any layer import it from here rather than from the package root above them."""

__version__ = "0.1.0"
