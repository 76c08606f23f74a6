"""Importers: other tools' datasets and scenarios as llmtt scenarios."""
