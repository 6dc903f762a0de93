"""The offline engine: a vLLM engine in a process of its own, the pipe between it and the suite, what
it reports of itself, and what runs inside it (the adaptive proposer, the draft model's acceptance).
"""
