"""Root conftest: the specperf plugin itself is registered through the pytest11 entry point.

Teams customise a run with pytest options (`--profile`, `--rounds`, `--dataset-dir`, ...) and
with the suite's hooks (specperf/hookspecs.py), implemented in a conftest.py of their own,
for example (tests/test_hooks.py runs this very example):

```python
import json
import os
import platform
import urllib.request


def pytest_specperf_machine_facts(config):
    # Recorded with every result (device.facts) and shown in the report.
    return {"kernel": platform.release()}


def pytest_specperf_result_written(config, result, path):
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(f"[team] {result.id}: {result.verdict.status if result.verdict else result.status}")


def pytest_specperf_run_finished(config, run, results, report):
    failing = [r.id for r in results if r.verdict is not None and r.verdict.failed]
    text = f"specperf {run.run_id}: {len(results)} scenarios, {len(failing)} failing; report {report}"
    url = os.environ.get("TEAM_CHAT_WEBHOOK")
    if url:  # post the verdicts to a chat channel
        body = json.dumps({"text": text}).encode()
        urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}), timeout=10)
    else:
        print(f"[team] {text}")
```
"""
