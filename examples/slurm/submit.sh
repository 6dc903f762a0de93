#!/usr/bin/env bash
# Submit a profile to Slurm as job arrays of shards of at most H hours, and a merge job after them.
#
#   examples/slurm/submit.sh PROFILE HOURS RUNS_DIR [PYTEST OPTION...]
#
# `specperf plan --max-shard-hours HOURS --arrays` gives an array per TP size: its tasks, the GPUs
# each asks for, and the options they share.  Each task runs shard.sbatch: shard
# $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT, into RUNS_DIR/<profile>-<array job>-<task>, a
# directory a requeued task goes on from (--run-dir).  merge.sbatch runs once every task has ended,
# failed ones included, and writes the merged report to RUNS_DIR/merged.  Extra arguments go to
# every task's pytest.  Run it from the checkout, on a node with the suite installed; SBATCH_*
# variables (SBATCH_PARTITION, SBATCH_ACCOUNT, ...) and SPECPERF_PYTHON reach the jobs.
# Prints the array jobs' ids, then the merge job's.
set -euo pipefail
if [[ $# -lt 3 ]]; then
    echo "usage: $0 PROFILE HOURS RUNS_DIR [PYTEST OPTION...]" >&2
    exit 2
fi
profile=$1 hours=$2 runs=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/../.." && pwd)
python=${SPECPERF_PYTHON:-python}
mkdir -p "$runs/logs"
runs=$(cd "$runs" && pwd)
name=$(basename "$profile" .toml)  # a profile's name, or its file's
extra=""  # the extra arguments, quoted for shard.sbatch's eval (none: no argument at all)
if [[ $# -gt 0 ]]; then
    extra=$(printf '%q ' "$@")
fi
arrays=$("$python" -m specperf.cli plan --profile "$profile" --max-shard-hours "$hours" --arrays)
jobs=()
while IFS=$'\t' read -r gpus tasks options; do
    per_task=()
    if [[ $gpus -gt 0 ]]; then
        per_task=(--gpus-per-task="$gpus")
    fi
    job=$(SPECPERF_PROFILE=$profile SPECPERF_NAME=$name SPECPERF_OPTIONS=$options SPECPERF_EXTRA=$extra SPECPERF_RUNS=$runs \
        SPECPERF_CHECKOUT=$checkout SPECPERF_PYTHON=$python \
        sbatch --parsable --array="1-$tasks" "${per_task[@]}" --output="$runs/logs/%x-%A_%a.log" \
        "$here/shard.sbatch")
    jobs+=("${job%%;*}")
    echo "$job"
done <<< "$arrays"
after=$(IFS=:; echo "${jobs[*]}")
SPECPERF_NAME=$name SPECPERF_ARRAYS=$after SPECPERF_RUNS=$runs SPECPERF_CHECKOUT=$checkout \
    SPECPERF_PYTHON=$python sbatch --parsable --dependency="afterany:$after" --output="$runs/logs/%x-%j.log" "$here/merge.sbatch"
