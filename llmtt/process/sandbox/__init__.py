"""Confinement: every process a run starts sees only what it needs (`bwrap`: the bubblewrap
command line for one process; `relay`: the network it is allowed, relayed over Unix sockets
from the harness).

May import: `llmtt.spec` and the leaves.
"""
