#!/usr/bin/env bash
# Submit a profile to Slurm as job arrays of shards of at most H hours, and a merge job after them.
#
#   examples/slurm/submit.sh PROFILE HOURS RUNS_DIR [PYTEST OPTION...]
#
# `specperf plan --max-shard-hours HOURS --arrays` gives an array per TP size: its tasks, the GPUs
# each asks for, the options they share and its longest shard's hours.  Each task runs shard.sbatch:
# shard $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT, into RUNS_DIR/<profile>-<array job>-<task>,
# a directory a requeued task goes on from (--run-dir).  merge.sbatch runs once every task has
# ended, failed ones included, and writes the merged report to RUNS_DIR/<profile>-<first array
# job>-merged.  -k and -m among the extra arguments select for the plan (the tasks repeat them);
# the others go to every task's pytest.  Run it from the checkout, on a node with the suite
# installed.  SBATCH_* variables (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_MEM_PER_GPU, ...) reach
# the jobs; SPECPERF_CPUS_PER_GPU (default 8) and SPECPERF_CPUS (CPU tier, default 1) size a task;
# without SBATCH_TIMELIMIT a task may run twice its longest shard's expected hours and half an hour.
# Prints the array jobs' ids, then the merge job's.
set -euo pipefail
if [[ $# -lt 3 ]]; then
    echo "usage: $0 PROFILE HOURS RUNS_DIR [PYTEST OPTION...]" >&2
    exit 2
fi
profile=$1 hours=$2 runs=$3
shift 3
if [[ -f $profile ]]; then
    profile=$(cd "$(dirname "$profile")" && pwd)/$(basename "$profile")  # the tasks run from the checkout
fi
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/../.." && pwd)
python=${SPECPERF_PYTHON:-python}
mkdir -p "$runs/logs"
runs=$(cd "$runs" && pwd)
name=$(basename "$profile" .toml)  # a profile's name, or its file's
select=() rest=()
while [[ $# -gt 0 ]]; do
    case $1 in
        -k | -m) select+=("$1" "$2"); shift 2 ;;
        *) rest+=("$1"); shift ;;
    esac
done
extra=""  # the other arguments, quoted for shard.sbatch's eval (none: no argument at all)
if [[ ${#rest[@]} -gt 0 ]]; then
    extra=$(printf '%q ' "${rest[@]}")
fi
arrays=$("$python" -m specperf.cli plan --profile "$profile" --max-shard-hours "$hours" --arrays "${select[@]}")
jobs=()
while IFS=$'\t' read -r gpus tasks options longest; do
    per_task=(--cpus-per-task="${SPECPERF_CPUS:-1}")
    if [[ $gpus -gt 0 ]]; then
        per_task=(--ntasks=1 --gpus-per-task="$gpus" --cpus-per-gpu="${SPECPERF_CPUS_PER_GPU:-8}")
    fi
    if [[ -z ${SBATCH_TIMELIMIT:-} ]]; then
        per_task+=(--time="$(awk -v h="$longest" 'BEGIN { printf "%d", h * 120 + 30 }')")  # minutes
    fi
    job=$(SPECPERF_PROFILE=$profile SPECPERF_NAME=$name SPECPERF_OPTIONS=$options SPECPERF_EXTRA=$extra \
        SPECPERF_RUNS=$runs SPECPERF_CHECKOUT=$checkout SPECPERF_PYTHON=$python \
        sbatch --parsable --array="1-$tasks" "${per_task[@]}" --output="$runs/logs/%x-%A_%a.log" \
        "$here/shard.sbatch")
    jobs+=("${job%%;*}")
    echo "$job"
done <<< "$arrays"
after=$(IFS=:; echo "${jobs[*]}")
SPECPERF_NAME=$name SPECPERF_ARRAYS=$after SPECPERF_RUNS=$runs SPECPERF_CHECKOUT=$checkout \
    SPECPERF_PYTHON=$python sbatch --parsable --dependency="afterany:$after" --output="$runs/logs/%x-%j.log" \
    "$here/merge.sbatch"
