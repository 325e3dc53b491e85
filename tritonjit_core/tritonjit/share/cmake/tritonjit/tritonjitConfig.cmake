# tritonjit's C++ API (header-only): find_package(tritonjit) with
#   -Dtritonjit_DIR=$(python -c "import tritonjit; print(tritonjit.get_cmake_dir())")
# gives the imported target tritonjit::tritonjit (its include directory and C++17).
# The header uses torch's and Python's C++ APIs: link your target against torch
# (find_package(Torch)), torch_python and Python as a torch extension does; the
# runtime itself is Python's tritonjit, so the process must run a Python interpreter
# (a torch extension module, or an embedding program).
get_filename_component(_tritonjit_pkg "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(tritonjit_INCLUDE_DIRS "${_tritonjit_pkg}/include")
if(NOT TARGET tritonjit::tritonjit)
  add_library(tritonjit::tritonjit INTERFACE IMPORTED)
  set_target_properties(tritonjit::tritonjit PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${tritonjit_INCLUDE_DIRS}"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
set(tritonjit_FOUND TRUE)
unset(_tritonjit_pkg)
