"""Leaf helpers for every layer: content hashes (`hashing`), the signatures of files a plan read
(`signatures`), atomic writes (`atomic`), text helpers (`text`).

May import: `llmtt.errors` only.
"""
