# Finds every dependency as a Debian package and stops with the package name to
# install when one is missing. scripts/install-deps.sh installs all of them.

function(tencache_require found what package)
  if(NOT ${found})
    message(FATAL_ERROR "tencache: ${what} not found. Install the Debian package '${package}' "
                        "(or run scripts/install-deps.sh).")
  endif()
endfunction()

find_package(Threads REQUIRED)

find_package(yaml-cpp QUIET)
tencache_require(yaml-cpp_FOUND "yaml-cpp" "libyaml-cpp-dev")
if(NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp INTERFACE IMPORTED)
  target_link_libraries(yaml-cpp::yaml-cpp INTERFACE yaml-cpp)
endif()

find_package(nlohmann_json 3 QUIET)
tencache_require(nlohmann_json_FOUND "nlohmann_json" "nlohmann-json3-dev")

find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp)
tencache_require(CLI11_INCLUDE_DIR "CLI11" "libcli11-dev")

find_program(GNUPLOT_EXECUTABLE gnuplot)
if(NOT GNUPLOT_EXECUTABLE)
  message(STATUS "tencache: gnuplot not found; run reports will have no pictures until 'gnuplot-nox' is installed")
endif()

find_package(PkgConfig QUIET)
tencache_require(PKG_CONFIG_FOUND "pkg-config" "pkg-config")
pkg_check_modules(URING QUIET IMPORTED_TARGET liburing)
tencache_require(URING_FOUND "liburing" "liburing-dev")

if(TENCACHE_BUILD_TESTS)
  find_package(GTest QUIET)
  tencache_require(GTest_FOUND "GoogleTest" "libgtest-dev libgmock-dev")
endif()

# CUDA: the device tier's cuda backend compiles whenever the toolkit is found.
set(TENCACHE_HAVE_CUDA OFF)
if(NOT TENCACHE_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TENCACHE_HAVE_CUDA ON)
  elseif(TENCACHE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "tencache: TENCACHE_CUDA=ON but no CUDA toolkit was found (set CUDAToolkit_ROOT).")
  endif()
endif()
message(STATUS "tencache: CUDA device tier: ${TENCACHE_HAVE_CUDA}")

# NCCL, for the worker's GPU collectives: the CUDA toolkit's copy, or the one
# named by NCCL_ROOT (e.g. the nvidia-nccl wheel's folder on a GPU machine).
set(TENCACHE_HAVE_NCCL OFF)
if(TENCACHE_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(TENCACHE_HAVE_NCCL ON)
    add_library(tencache::nccl UNKNOWN IMPORTED)
    set_target_properties(tencache::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
endif()
message(STATUS "tencache: NCCL (GPU collectives): ${TENCACHE_HAVE_NCCL}")

# The worker needs libtorch and MPI.
set(TENCACHE_HAVE_WORKER OFF)
if(NOT TENCACHE_WORKER STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  find_package(Torch QUIET)
  if(MPI_CXX_FOUND AND Torch_FOUND)
    set(TENCACHE_HAVE_WORKER ON)
  elseif(TENCACHE_WORKER STREQUAL "ON")
    tencache_require(MPI_CXX_FOUND "MPI" "libopenmpi-dev openmpi-bin")
    tencache_require(Torch_FOUND "libtorch" "libtorch-dev libopenblas0-pthread")
  endif()
endif()
message(STATUS "tencache: worker (libtorch + MPI): ${TENCACHE_HAVE_WORKER}")
