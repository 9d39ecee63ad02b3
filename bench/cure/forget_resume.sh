#!/usr/bin/env bash
# forget --resume through the executable: a CURE run stopped by a real SIGINT after its step-500 checkpoint,
# resumed, against the same run uninterrupted; a resume with another flag is refused. Writes forget_resume.txt.
# Usage: bash bench/cure/forget_resume.sh [WORKDIR]   (one thread; about a minute on an idle core)
set -u
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work" && cd "$work" || exit 1
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 MKL_NUM_THREADS=1
cu() { nice -n 5 cure-unlearn "$@"; }
cu collect --scale 0.1 --chunk 40 --behaviour cpg -o d.npz --force -q > /dev/null
cu train d.npz --steps 100 --hidden 32 -j 1 -o m.safetensors --force -q > /dev/null
args=(forget m.safetensors d.npz --forget-contributor F-mix --steps 1500 --baseline-steps 100 --calib-trajs 10
      --checkpoint-every 500 -j 1 -q)
rm -f straight.* cut.*
cu "${args[@]}" -o straight.safetensors > straight.json
nice -n 5 cure-unlearn "${args[@]}" -o cut.safetensors > /dev/null 2> cut.err &  # not the function: $! is the tool
pid=$!
until grep -q '"step": 500' cut.partial.json 2> /dev/null; do sleep 0.2; done
kill -INT "$pid"
wait "$pid"
rc_stop=$?
stopped=$(python -c 'import json; print(json.load(open("cut.partial.json"))["step"])')
cu "${args[@]}" --lambda-s 2 --resume -o cut.safetensors 2> mismatch.err
rc_mismatch=$?
cu "${args[@]}" --resume -o cut.safetensors > cut.json
rc_resume=$?
python - "$rc_stop" "$stopped" "$rc_mismatch" "$rc_resume" > "$here/forget_resume.txt" <<'PY'
import json, os, sys
from safetensors.numpy import load_file
rc_stop, stopped, rc_mismatch, rc_resume = sys.argv[1:]
a, b = load_file("straight.safetensors"), load_file("cut.safetensors")
same = a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
x, y = json.load(open("straight.json")), json.load(open("cut.json"))
differ = sorted(k for k in x if x[k] != y.get(k))
print("case  value")
print(f"stopped_by_sigint_exit  {rc_stop}  (stderr: {open('cut.err').read().strip()})")
print(f"checkpoint_step  {stopped} of {x['steps']}")
print(f"resume_other_flag_exit  {rc_mismatch}  ({open('mismatch.err').read().strip()})")
print(f"resume_exit  {rc_resume}")
print(f"tensors_identical  {same}  ({len(a)} tensors)")
print(f"json_fields_differing  {', '.join(differ)}")
print(f"checkpoint_left  {os.path.exists('cut.partial.safetensors')}")
PY
cat "$here/forget_resume.txt"
