"""methodkit.tools: each method as a library (no click, no printing, no sys.exit)."""
