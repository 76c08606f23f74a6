"""`python -m llmtt.taskgraph ARGS` (what `llmtt doit ARGS` runs): doit with llmtt's loader."""

import sys

from llmtt.taskgraph.loader import main

sys.exit(main(sys.argv[1:]))
