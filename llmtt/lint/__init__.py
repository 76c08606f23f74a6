"""`llmtt lint`, the static tier: the target tool's surface (`surface`, read with `helptext`),
the guidance files (`guidance`), the scenarios' leakage (`leakage`), over a project
(`project`), as findings (`findings`)."""
