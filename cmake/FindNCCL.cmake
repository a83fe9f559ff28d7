# FindNCCL: locates the NVIDIA Collective Communications Library.
#
# Looked for, in order: NCCL_ROOT / $NCCL_ROOT / $NCCL_HOME, the CUDA toolkit
# (CUDAToolkit_LIBRARY_ROOT, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda), the
# `nvidia-nccl-cu13` / `nvidia-nccl-cu12` Python wheels of the interpreter on
# PATH (they ship include/nccl.h and lib/libnccl.so.2 but no unversioned
# libnccl.so), then the system paths (Debian/Ubuntu `libnccl-dev`).
#
# Result: NCCL_FOUND, NCCL_VERSION, NCCL_INCLUDE_DIR, NCCL_LIBRARY and the
# imported target NCCL::nccl.

set(_nccl_hints)
foreach(_dir IN ITEMS "${NCCL_ROOT}" "$ENV{NCCL_ROOT}" "$ENV{NCCL_HOME}" "${CUDAToolkit_LIBRARY_ROOT}"
                      "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}" /usr/local/cuda)
  if(_dir)
    list(APPEND _nccl_hints "${_dir}")
  endif()
endforeach()

# The wheel installs a namespace package (nvidia.nccl has no __file__): ask
# the interpreter where it is instead of guessing site-packages paths.
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  find_program(_nccl_python NAMES python3 python)
  if(_nccl_python)
    execute_process(
      COMMAND "${_nccl_python}" -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE _nccl_wheel_dir OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET RESULT_VARIABLE _nccl_py_rc)
    if(_nccl_py_rc EQUAL 0 AND IS_DIRECTORY "${_nccl_wheel_dir}")
      list(APPEND _nccl_hints "${_nccl_wheel_dir}")
    endif()
  endif()
  unset(_nccl_python CACHE)
endif()

find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
# libnccl.so.2 by its full name: the wheel has no development symlink.
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _m "${_nccl_ver}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
