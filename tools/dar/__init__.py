"""dar: Discover-and-Relabel, a label-only backdoor whose trigger is a natural pattern of clean data.

(1) discover abundant patterns in low-dimensional subspaces (CLIQUE-style dense cells of pixel
windows or DCT coefficient blocks), (2) relabel only training samples that already satisfy the
rule, (3) trigger at test time by moving an image's subspace into the cell. Because the trigger
lies in the support of clean data, clean knowledge distillation transfers it.
"""
