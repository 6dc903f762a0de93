"""Tracing a scenario: the step-timer plugin loaded into a traced engine (vllm_trace/), and the traces
it gives.
"""
