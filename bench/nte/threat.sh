#!/bin/sh
# What nte-encode protects against, measured through the executables (docs/nte.md, "Threat model").
# Zoo: pcnn-p4c8 seeds 0 and 1 (same architecture, other seed) and cnn3c16 seed 0, Fashion-MNIST 20,000
# train images, 3 epochs; the authorized model is pcnn-p4c8-s0; 2,000 test images; encode seed 0.
# Usage: sh bench/nte/threat.sh OUT_DIR > bench/nte/threat.txt   (one thread; about 5 CPU-minutes)
set -eu
out=${1:?usage: sh bench/nte/threat.sh OUT_DIR}
mkdir -p "$out"
cd "$out"
export OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 MKL_NUM_THREADS=1
auth=zoo/pcnn-p4c8-s0.safetensors
models="--auth $auth --unauth zoo/pcnn-p4c8-s1.safetensors --unauth zoo/cnn3c16-s0.safetensors"
clean="--clean-dataset fashion-mnist:test --limit 2000"
[ -f zoo/cnn3c16-s0.safetensors ] || {
  nte-encode zoo --arch pcnn-p4c8 --seeds 0,1 --train-size 20000 --epochs 3 -j 1 -q -o zoo > /dev/null
  nte-encode zoo --arch cnn3c16 --seeds 0 --train-size 20000 --epochs 3 -j 1 -q --force -o zoo > /dev/null
}
nte-encode key $auth -o key.npz --force > /dev/null
row() { # condition, then the eval lines: model role drop agreement max_abs_dlogit
  python3 -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(sys.argv[1], r["model"], r["role"], "drop %.1f pts" % (100 * r["drop"]), "agreement %.3f" % r["agreement"],
          "max_dlogit %.2e" % r["max_abs_dlogit"], sep="  ")' "$1"
}
for psnr in 10 20; do
  nte-encode encode --dataset fashion-mnist:test --limit 2000 --key key.npz --psnr $psnr --model $auth \
    --png png$psnr --force -o c$psnr.npz > /dev/null
  nte-encode eval c$psnr.npz $clean $models | row "float32_${psnr}dB"
  nte-encode eval png$psnr $clean $models | row "png8bit_${psnr}dB"
  nte-encode encode --dataset fashion-mnist:test --limit 2000 --key key.npz --psnr $psnr --noise gaussian \
    --force -o w$psnr.npz > /dev/null
  nte-encode eval w$psnr.npz $clean $models | row "white_noise_${psnr}dB"
done
for t in jpeg:90 brightness:0.05; do
  nte-encode eval c10.npz $clean $models --transform $t | row "float32_10dB_$t"
done
nte-encode attack c10.npz --method wiener --public-dataset fashion-mnist:train --public-limit 5000 --force \
  -o wiener10.npz > /dev/null
nte-encode eval wiener10.npz $clean $models | row "wiener_10dB"
# the retrained attacker: pcnn-p4c8-s1's architecture retrained (20,000 train images x 3 epochs, seed 0)
# on training images passed through the same Wiener map, then scored on the Wiener-restored ciphertexts
nte-encode attack c10.npz --method wiener --public-dataset fashion-mnist:train --public-limit 5000 --force \
  --retrain zoo/pcnn-p4c8-s1.safetensors --retrained-out attacker.safetensors -o wiener10r.npz > wiener10r.json
nte-encode eval wiener10r.npz $clean --unauth attacker.safetensors | row "wiener_10dB_retrained_attacker"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["retrain"]; print("retrain_report", json.dumps(r))' wiener10r.json
