"""Names `run` accepts, in a module without torch or Numba, so bad options fail before heavy imports."""

ARCHS = ("cnn-s", "cnn-xs", "resnet8")  # victim networks (tools/dar/nets.py)
METHODS = ("clean", "dar", "badnets", "blended", "random")  # poisoning methods compared by `run`
DEFENSES = ("ft", "fp", "ss")  # fine-tuning, fine-pruning, Spectral Signatures
OPERATORS = ("coordinate", "band-carrier")  # test-time operators of a whitened rule (rules.apply, band.py)
