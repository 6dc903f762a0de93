# numpy first imported inside one of pytester's in-process runs is unloaded after it, and numpy
# cannot be loaded twice in a process: the next in-process run that imports it would fail with an
# internal error, so whether a plugin test passed would hang on which tests ran before it.
import numpy  # noqa: F401

pytest_plugins = ["pytester"]
