"""The spectral fits' solvers: their registry, costs and the choice of ``"auto"``."""

from .choice import REGISTRY, Problem, SolverChoice, choose

__all__ = ["REGISTRY", "Problem", "SolverChoice", "choose"]
