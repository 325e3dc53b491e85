"""Operator test setup: operators launch through tritonjit on the active backend
(Triton's interpreter on CPU tensors on a machine without an accelerator)."""
