"""methodkit.cli: one thin click command per executable."""
