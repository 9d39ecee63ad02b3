"""Issue 34 item 1 check: Credit-g dummy-coded as pandas.get_dummies writes it (one 0/1 column per level of
each categorical), a stratified 70/30 split (seed 0); then `gbdt-poison attack` on it (see run line below).

python -P bench/gbdt/issue34/onehot_credit.py OUTDIR   -> OUTDIR/train.csv, OUTDIR/test.csv
"""

import sys
from pathlib import Path

import pandas as pd
from sklearn.model_selection import train_test_split

from methodkit.core import datasets

out = Path(sys.argv[1])
frame = datasets.load("credit_g")
label = "credit"
cats = [c for c in frame.columns if c != label and not pd.api.types.is_numeric_dtype(frame[c])]
coded = pd.get_dummies(frame, columns=cats, prefix=cats)
coded = coded.astype({c: int for c in coded.columns if coded[c].dtype == bool})
train, test = train_test_split(coded, test_size=0.3, stratify=coded[label], random_state=0)
out.mkdir(parents=True, exist_ok=True)
train.to_csv(out / "train.csv", index=False)
test.to_csv(out / "test.csv", index=False)
print(len(train), len(test), coded.shape[1] - 1, "columns")
# gbdt-poison attack OUTDIR/train.csv --test OUTDIR/test.csv --label credit --val-frac 0.3 --budget 0.1 --eps 4 \
#     -o OUTDIR/p.csv > bench/gbdt/issue34/onehot-credit.json   (and --dim-rank random --influence random)
