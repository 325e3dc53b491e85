"""Backends shipped inside the core (only the interpreter: every accelerator is a plugin)."""
