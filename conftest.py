"""Root conftest: the specperf plugin itself is registered through the pytest11 entry point.

Teams customise a run here (or in their own conftest.py) with pytest options and hooks,
for example `--profile`, `--rounds` or `--dataset-dir`.
"""
