"""specperf: a pytest-based performance regression suite for speculative decoding on vLLM."""

__version__ = "0.1.0"
