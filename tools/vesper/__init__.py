"""VESPER: video safety reasoning (anticipating harm, principle hierarchy) on simulated robot scenes."""
