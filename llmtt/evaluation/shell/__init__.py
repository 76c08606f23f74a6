"""Reading agents' shell lines as bash would: words and tokens (`lexer`), the syntax tree
(`syntax`, data only), its parser (`parser`), and the target commands found in them with their
subcommands and exit codes (`target_commands`).

May import: `llmtt.spec` and the leaves (as the rest of `llmtt.evaluation`).
"""
