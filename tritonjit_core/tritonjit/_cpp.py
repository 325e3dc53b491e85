"""Where the C++ API's files are: the header-only include folder and the CMake config."""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """The folder to add to the include path for ``#include <tritonjit/function.h>``
    (as ``pybind11.get_include()``); torch's include paths are needed beside it."""
    return os.path.join(_HERE, "include")


def get_cmake_dir() -> str:
    """The folder holding ``tritonjitConfig.cmake``: pass it as ``-Dtritonjit_DIR=...``
    to ``find_package(tritonjit)``, which gives the target ``tritonjit::tritonjit``."""
    return os.path.join(_HERE, "share", "cmake", "tritonjit")
