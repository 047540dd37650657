"""The version of scalepca, in one module that imports nothing (model stores and reports
record it)."""

__version__ = "0.1.0"
