"""vLLM builds: what each version calls a method and takes as engine arguments, which vLLM is
installed, and what a build (an environment's interpreter) offers.
"""
