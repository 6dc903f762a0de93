#!/usr/bin/env bash
# Render a sweep's Jobs, start the shards, wait until every shard Job has ended, then start the merge.
#
#   examples/kubernetes/submit.sh PROFILE HOURS NAME IMAGE [-- PYTEST OPTION...]
#
# kubectl's current context and namespace are used; runs-pvc.yaml must be applied there once.
set -euo pipefail
if [[ $# -lt 4 ]]; then
    echo "usage: $0 PROFILE HOURS NAME IMAGE [-- PYTEST OPTION...]" >&2
    exit 2
fi
profile=$1 hours=$2 name=$3 image=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
"${SPECPERF_PYTHON:-python}" "$here/render.py" "$profile" "$hours" --name "$name" --image "$image" --out "$out" "$@"
kubectl apply -f "$out/shards.yaml"
for job in $(kubectl get jobs -l "specperf/sweep=$name" -o name); do
    # Complete or Failed (a shard that failed stops no other; the merge shows what each wrote)
    until kubectl get "$job" -o jsonpath='{.status.conditions[*].type}' | grep -qE 'Complete|Failed'; do
        sleep 60
    done
done
kubectl apply -f "$out/merge.yaml"
