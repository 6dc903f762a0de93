"""Behind vLLM's OpenAI-compatible server: the server's process, the streamed load a round sends, its
Prometheus counters, and a server the suite did not start.
"""
