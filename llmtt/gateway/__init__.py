"""The model gateway: every model request of a run goes through llmtt on 127.0.0.1, which adds
the real credential upstream and reads each answer's usage off the wire (`meter`: the three
wire formats, streamed or not; `proxy`: the HTTP server that forwards).

May import: `llmtt.spec` and the leaves.
"""
