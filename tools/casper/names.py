"""The tasks and training methods of casper-solve, importable without NumPy (for --help and the flags)."""

TASKS = ("warcraft", "sudoku", "shidoku", "mnist-add")
METHODS = (
    "casper",
    "unconstrained",
    "solver",
    "sl-sample",
    "sl-exact",
    "pyepo-dbb",
    "pyepo-pfyl",
    "pyepo-imle",
    "pyepo-fw",
    "pishield",
    "deepproblog",
)
