"""methodkit.core: method-agnostic building blocks shared by every tool."""
