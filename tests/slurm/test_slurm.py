"""A study-size sweep's path on a real Slurm: examples/slurm/ on a single-node cluster from Debian's
packages (munge, slurmctld, slurmd on this machine, no GPU resources), the CPU tier's resume
profile cut into an array of two shards plus the merge job.  One task is cancelled once it has
finished a scenario and requeued: its second try keeps that result and measures the rest.

Needs `apt-get install slurm-wlm munge` and the CPU tier's environment: `tox -e slurm`.  It is not
part of .ci/run (a cluster start and two engines' runs cost minutes CI does not have); its log is in
docs/methodology/cluster.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_tier

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "tests" / "cpu_tier" / "profiles" / "resume.toml"
HOURS = "0.035"  # cuts the resume profile's three engine-and-reference pieces into two shards
SCENARIOS = {f"tiny-llama-{m}-bs{b}-instructcoder" for m in ("nosd", "eagle-k3") for b in (1, 2, 4)}
DAEMONS = ("munged", "slurmctld", "slurmd")
TIMEOUT_S = 1800


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, ready, timeout_s: float = TIMEOUT_S, every_s: float = 1.0):
    """Poll `ready()` until it returns something true (a file, a job state): its value."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"waited {timeout_s:.0f} s for {what}")


class Cluster:
    """A Slurm of one node, this machine, under `folder`: its own munge key and socket, its own ports."""

    def __init__(self, folder: Path):
        self.folder, self.processes = folder, []
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        munge = self.folder / "munge"
        munge.mkdir(mode=0o700)
        (munge / "key").write_bytes(os.urandom(1024))
        (munge / "key").chmod(0o400)
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir()
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2
        self.conf.write_text(
            f"""ClusterName=specperf
SlurmctldHost={self.node}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket={munge / "socket"}
CredType=cred/munge
StateSaveLocation={self.folder / "state"}
SlurmdSpoolDir={self.folder / "spool"}
SlurmctldPidFile={self.folder / "slurmctld.pid"}
SlurmdPidFile={self.folder / "slurmd.pid"}
SlurmctldLogFile={self.folder / "slurmctld.log"}
SlurmdLogFile={self.folder / "slurmd.log"}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobRequeue=1
KillWait=60
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        )
        self.spawn(
            "munged",
            "--force",
            "--foreground",
            f"--socket={munge / 'socket'}",
            f"--key-file={munge / 'key'}",
            f"--pid-file={munge / 'pid'}",
            f"--seed-file={munge / 'seed'}",
            f"--log-file={munge / 'log'}",
        )
        wait_for("munged's socket", (munge / "socket").exists, 30, 0.1)
        self.spawn("slurmctld", "-D", "-f", str(self.conf))
        self.spawn("slurmd", "-D", "-N", self.node, "-f", str(self.conf))
        wait_for("the node to be idle", lambda: self.run("sinfo", "-h", "-o", "%T").strip() == "idle", 60)

    def spawn(self, *argv: str) -> None:
        log = (self.folder / f"{argv[0]}.out").open("w")
        self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env))

    def run(self, *argv: str, check: bool = True, env: dict | None = None) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=env or self.env, cwd=ROOT, timeout=600)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)}: exit {done.returncode}: {done.stdout} {done.stderr}")
        return done.stdout

    def succeeds(self, *argv: str) -> bool:
        return subprocess.run(argv, capture_output=True, env=self.env, timeout=60).returncode == 0

    def job_state(self, job: str) -> str:
        shown = self.run("scontrol", "show", "job", "-o", job, check=False)
        match = re.search(r"JobState=(\S+)", shown)
        return match.group(1) if match else ""

    def stop(self) -> None:
        self.run("scancel", "--user", "root", check=False)
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} not installed: apt-get install slurm-wlm munge")
        pytest.skip(f"{', '.join(missing)} not installed: apt-get install slurm-wlm munge")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def measured(path: Path) -> dict:
    """What a result measured: its rounds, metrics and when (a kept result is judged and written again)."""
    result = json.loads(path.read_text())
    return {key: result[key] for key in ("rounds", "metrics", "started_at", "finished_at", "outputs")}


def submitted_array(cluster: Cluster, runs: Path) -> tuple[str, int, str]:
    """examples/slurm/submit.sh on the resume profile: (the array job, its tasks, the merge job)."""
    env = {**cluster.env, "SPECPERF_PYTHON": sys.executable, "SPECPERF_HISTORY": "off"}
    plan = cluster.run(
        sys.executable,
        "-m",
        "specperf.cli",
        "plan",
        "--profile",
        str(PROFILE),
        "--max-shard-hours",
        HOURS,
        "--arrays",
        env=env,
    )
    ((gpus, tasks, options, _),) = [line.split("\t") for line in plan.splitlines()]
    assert (gpus, tasks, options) == ("0", "2", f"--max-shard-hours {HOURS}")
    out = cluster.run(str(ROOT / "examples" / "slurm" / "submit.sh"), str(PROFILE), HOURS, str(runs), env=env)
    array, merge = out.split()
    print(f"submitted: array job {array} ({tasks} tasks), merge job {merge}")
    return array, int(tasks), merge


def test_an_array_of_shards_with_a_requeued_task_merges_into_one_report(cluster, tmp_path):
    from specperf.profiles.scenarios import load_profile
    from specperf.run import sharding

    runs = tmp_path / "runs"
    array, tasks, merge = submitted_array(cluster, runs)
    scenarios = list(load_profile(str(PROFILE)).scenarios)
    parts = sharding.assign(scenarios, tasks, float(HOURS) * 3600)
    longer = max(range(tasks), key=lambda i: len(parts[i])) + 1  # the task with two engine pieces
    task = f"{array}_{longer}"
    results = runs / f"resume-{array}-{longer}" / "results"
    first = wait_for(f"task {task}'s first result", lambda: sorted(results.glob("*.json")), every_s=0.5)
    cluster.run("scancel", task)
    wait_for(f"task {task} to end", lambda: cluster.job_state(task) == "CANCELLED")
    kept = {p.name: measured(p) for p in results.glob("*.json")}
    assert len(kept) < len(parts[longer - 1]), "the task finished before it was cancelled"
    print(f"cancelled {task} after {len(kept)} of {len(parts[longer - 1])} results: {sorted(kept)}")
    # requeue is refused while the task is still completing (its processes stopping)
    wait_for(f"{task} requeued", lambda: cluster.succeeds("scontrol", "requeue", task), 120)
    cluster.run("scontrol", "update", f"jobid={task}", "StartTime=now")  # no requeue delay
    state = wait_for("the merge job", lambda: (s := cluster.job_state(merge)) in ("COMPLETED", "FAILED") and s)
    logs = {p.name: p.read_text() for p in (runs / "logs").glob("*.log")}
    for name, text in sorted(logs.items()):  # what each try said of itself, and pytest's last line
        said = [line for line in text.splitlines() if re.search(r"^specperf|\[resumed\]|CANCELLED| in [0-9.]+s", line)]
        print(f"--- {name}\n" + "\n".join(said))
    assert state == "COMPLETED"
    task_log = logs[f"specperf-shard-{array}_{longer}.log"]
    assert "try 1," in task_log and "try 2," in task_log  # one log, both tries (--open-mode=append)
    for name in kept:
        assert f"[resumed] {Path(name).stem}: kept from" in task_log
        assert measured(results / name) == kept[name]  # judged again with the run, not measured again
    assert {p.stem for p in results.glob("*.json")} == {s.id for s in parts[longer - 1]}
    summary = json.loads((runs / f"resume-{array}-merged" / "summary.json").read_text())
    ids = [s["id"] for s in summary["scenarios"]]
    assert sorted(ids) == sorted(SCENARIOS) and len(summary["run_dirs"]) == tasks
    assert all(s["result_status"] == "ok" for s in summary["scenarios"])
    print(f"merged report: {len(ids)} scenarios from {len(summary['run_dirs'])} shard runs; first kept {first[0].name}")
