"""Running processes: a command under a pseudo-terminal with a hard timeout (`pty`, started with
posix_spawn by `spawn`), the process tree a run started (`tree`), plain shell commands (`shell`),
and the watchdog that ends a run's processes when the `doit` that started them dies
(`watchdog`).

May import: `llmtt.spec` and the leaves.
"""
