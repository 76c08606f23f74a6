"""Trajectories in formats other tools read and write: a run exported as one, one imported as a
run (ATIF, Harbor's Agent Trajectory Interchange Format: `atif`)."""
