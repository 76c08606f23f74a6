"""Names in a project's results folder that llmtt keeps for itself. A module of its own, with
nothing to import, so that the task graph's code can read it while loading from the plan cache
without the scenario loader (pydantic, yaml) coming with it."""

# report.html's folder of run panels (llmtt.report.panels writes it), in the results folder
# beside the scenarios' folders: no scenario may take its name.
PANELS_FOLDER = "report-runs"
