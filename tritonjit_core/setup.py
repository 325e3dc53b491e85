"""Builds the optional native dispatcher (tritonjit._native._dispatch).

optional=True: where no C compiler is found the build goes on without it, and
tritonjit runs its pure-Python launch path (the reference, also chosen with
TRITONJIT_NO_NATIVE=1)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tritonjit._native._dispatch",
            sources=["tritonjit/_native/_dispatch.c"],
            include_dirs=["tritonjit/_native"],
            extra_compile_args=["-O2", "-std=c11", "-Wall"],
            optional=True,
        )
    ]
)
