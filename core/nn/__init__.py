"""Small torch models shared by several methods (transformer decoder, image classifiers)."""
