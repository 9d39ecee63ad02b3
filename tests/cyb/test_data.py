"""arith generation, token classes by hand, windows and their errors."""

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.cyb.data import (
    ArithSpec,
    Windows,
    arith_classes,
    arith_corpus,
    arith_problem,
    byte_classes,
)


def test_arith_problem_formats():
    assert arith_problem(999, 1, 4, False) == "0999+0001=1000\n"
    assert arith_problem(999, 1, 4, True) == "9990+1000=0001\n"


def test_arith_corpus_is_seeded_and_correct():
    a, b = (
        arith_corpus(ArithSpec(problems=30, per_document=10), 1),
        arith_corpus(ArithSpec(problems=30, per_document=10), 1),
    )
    assert a == b and len(a) == 3
    for line in "".join(a.texts).splitlines():
        left, answer = line.split("=")
        x, y = left.split("+")
        assert int(x) + int(y) == int(answer) and len(x) == len(y) == 4


def test_arith_classes_mark_carries_by_hand():
    text = "0999+0001=1000\n1234+4321=5555\n"
    cls = arith_classes(np.frombuffer(text.encode(), dtype=np.uint8))
    # operands 0, symbols 1, answer 2, answer digit receiving a carry 3
    assert cls[:15].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 3, 2, 1]
    assert cls[15 + 10 : 15 + 14].tolist() == [2, 2, 2, 2]  # 1234 + 4321: no carries
    rev = arith_classes(np.frombuffer(b"9990+1000=0001\n", dtype=np.uint8), reverse=True)
    assert rev[10:14].tolist() == [2, 3, 3, 3]


def test_byte_classes_by_hand():
    cls = byte_classes(np.frombuffer(b"Hi, 42 ab", dtype=np.uint8)).tolist()
    assert cls == [0, 1, 3, 2, 4, 4, 2, 0, 1]


def test_windows_and_too_small():
    w = Windows(np.arange(21), 5)
    assert w.count == 4
    x, y = w.batch([0, 3])
    assert x.tolist()[1] == [15, 16, 17, 18, 19] and y.tolist()[1] == [16, 17, 18, 19, 20]
    with pytest.raises(DataError, match="fewer than one window"):
        Windows(np.arange(5), 5)
