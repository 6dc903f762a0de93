"""Analyses of measured results that judge nothing: the speedup simulator, the fitted step cost,
headroom, vLLM's n-gram rule and what traces say."""
