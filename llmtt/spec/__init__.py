"""What users write, as pydantic models: llmtt.toml (`config`), scenarios (`scenario`, with their
`gates`, `evaluation` specs and `scripted` sessions), rubrics, the YAML/TOML loading with line
maps (`loading`), the loaded project and its cross-checks (`project`), and doit's selection
arguments (`selection`).

May import: the leaves (`llmtt.events`, `llmtt.redaction`, `llmtt.registry`, `llmtt.util`,
`llmtt.errors`). Everything above reads these types; nothing here knows how a run is carried out.
"""
