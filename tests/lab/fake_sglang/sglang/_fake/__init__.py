"""Internals of the fake SGLang (not part of real sglang)."""
