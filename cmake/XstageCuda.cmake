# CUDA-side settings shared by the runtime, benchmarks and kernels.
# CuTe/CUTLASS headers come from the PyPI package nvidia-cutlass (scripts/deps.sh installs it).
find_package(Python3 COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
  OUTPUT_VARIABLE XSTAGE_CUTLASS_INCLUDE OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _cutlass_rc)
if(NOT _cutlass_rc EQUAL 0 OR NOT EXISTS "${XSTAGE_CUTLASS_INCLUDE}/cute/tensor.hpp")
  message(FATAL_ERROR "CuTe headers not found: run scripts/deps.sh (pip install nvidia-cutlass)")
endif()
add_library(xstage_cutlass INTERFACE)
target_include_directories(xstage_cutlass SYSTEM INTERFACE ${XSTAGE_CUTLASS_INCLUDE})

# NCCL 2.28 (host API + device API headers) from the CUDA toolkit.
find_library(XSTAGE_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
find_path(XSTAGE_NCCL_INCLUDE nccl_device.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
add_library(xstage_nccl INTERFACE)
target_include_directories(xstage_nccl INTERFACE ${XSTAGE_NCCL_INCLUDE})
target_link_libraries(xstage_nccl INTERFACE ${XSTAGE_NCCL_LIB})

set(XSTAGE_CUDA_FLAGS --expt-relaxed-constexpr -lineinfo -Xptxas=-v)

# A benchmark's --help prints its source's header comment: cmake/usage_from_header.py writes it as kUsage into
# <target>_usage.inc, which the source includes (xstage/bench/usage.hpp).
function(xstage_usage target source)
  set(inc ${CMAKE_CURRENT_BINARY_DIR}/${target}_usage.inc)
  add_custom_command(OUTPUT ${inc}
    COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/cmake/usage_from_header.py
            ${CMAKE_CURRENT_SOURCE_DIR}/${source} ${inc}
    DEPENDS ${source} ${PROJECT_SOURCE_DIR}/cmake/usage_from_header.py
    COMMENT "usage of ${target} from ${source}'s header" VERBATIM)
  target_sources(${target} PRIVATE ${inc})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
endfunction()
