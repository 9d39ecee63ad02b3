"""clapping: pipeline-parallel training with compressed activations/gradients and lazy sampling.

Kong et al., "Clapping: Removing Per-sample Storage for Pipeline Parallel Distributed
Optimization with Communication Compression" (arXiv 2509.19029). The variant names FU/FC are
our reading (first-step uncompressed / fully compressed), flagged in the man page.
"""
