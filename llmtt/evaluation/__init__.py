"""Evaluation: interaction metrics (layer 1), gates (layer 2), judge (layer 3), outcome."""
