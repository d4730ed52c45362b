"""sTask-graphs: construction from the typed program, Propagate, printing."""
from .build import build_graph, build_graphs
from .graph import Edge, Region, STask, STaskGraph, Work
from .printer import print_graph, to_dot
from .propagate import propagate

__all__ = ["build_graph", "build_graphs", "propagate", "print_graph", "to_dot",
           "STask", "STaskGraph", "Edge", "Region", "Work"]
