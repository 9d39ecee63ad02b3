import sys
import time

import torch

from methodkit.tools.nte import data
from methodkit.tools.nte.encode import encode
from methodkit.tools.nte.key import extract_key
from methodkit.tools.nte.models import ModelConfig
from methodkit.tools.nte.zoo import accuracy, fit

torch.set_num_threads(2)
N = int(sys.argv[1])
E = int(sys.argv[2])
lr = float(sys.argv[3])
archs = sys.argv[4].split(",")
x, y = data.from_dataset("fashion-mnist:train", N)
xt, yt = data.from_dataset("fashion-mnist:test", 2000)
ms = {}
for a in archs:
    arch, seed = a.rsplit("-s", 1)
    t = time.process_time()
    w = time.time()
    m = fit(ModelConfig(arch, int(seed)), x, y, epochs=E, lr=lr)
    ms[a] = m
    print(
        a,
        "acc",
        accuracy(m, xt, yt),
        "cpu",
        round(time.process_time() - t, 1),
        "wall",
        round(time.time() - w, 1),
        flush=True,
    )
auth = archs[0]
stem = ms[auth].stem_spec()
key = extract_key(stem)
for psnr in (20.0, 10.0):
    c = encode(xt, key, psnr, seed=0)
    g = encode(xt, key, psnr, seed=0, noise="gaussian")
    for a, m in ms.items():
        print(psnr, a, "nte", round(accuracy(m, c.view, yt), 3), "white", round(accuracy(m, g.view, yt), 3))
