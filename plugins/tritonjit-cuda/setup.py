"""Builds the C driver extension. It needs no CUDA headers or libcuda at build time:
libcuda.so.1 is opened with dlopen when the backend is first used."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tritonjit_cuda._driver",
            sources=["tritonjit_cuda/_driver.c"],
            include_dirs=["tritonjit_cuda"],
            libraries=["dl"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"],
        )
    ]
)
