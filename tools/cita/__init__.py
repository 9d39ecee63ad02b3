"""CITA: comparative inference for tool-use agents (a pairwise value model of the next tool call)."""
