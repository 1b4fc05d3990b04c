# Helpers to declare Tessel libraries and tests with the project's shared options.

# tessel_add_library(name SOURCES ... DEPS ...): static library tessel_<name>, alias tessel::<name>.
function(tessel_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;CUDA_SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(srcs ${ARG_SOURCES})
  if(TESSEL_WITH_CUDA)
    list(APPEND srcs ${ARG_CUDA_SOURCES})
  endif()
  add_library(tessel_${name} STATIC ${srcs})
  add_library(tessel::${name} ALIAS tessel_${name})
  target_link_libraries(tessel_${name} PUBLIC tessel_options ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_include_directories(tessel_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  set_target_properties(tessel_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
                        CUDA_SEPARABLE_COMPILATION OFF)
endfunction()

set(TESSEL_MPIEXEC_FLAGS --oversubscribe --bind-to none)
# Open MPI refuses to run as root unless told; CI and containers run as root.
set(TESSEL_MPI_TEST_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
    # Tests run more ranks than cores: idle ranks yield instead of spinning on the CPU.
    OMPI_MCA_mpi_yield_when_idle=1
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1)

# GCC 12 reports -Wrestrict false positives inside std::string's operator+ (GCC bug 105329),
# which the tests use to build command lines.
set(TESSEL_TEST_COMPILE_OPTIONS
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)

# tessel_add_test(name SOURCES ... DEPS ... [LABELS ...]): one gtest executable, one ctest entry.
function(tessel_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${TESSEL_TEST_COMPILE_OPTIONS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} tessel_test_support GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}"
    ENVIRONMENT "OMP_NUM_THREADS=2")
endfunction()

# tessel_add_mpi_test(name SOURCES ... DEPS ... RANKS 1 2 4): one executable with the MPI gtest
# main, registered as name.np<R> for each rank count and run under mpirun.
function(tessel_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;RANKS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${TESSEL_TEST_COMPILE_OPTIONS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} tessel_test_support tessel_mpi_gtest_main GTest::gtest)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${TESSEL_MPIEXEC_FLAGS} -np ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}.np${np} PROPERTIES TIMEOUT ${ARG_TIMEOUT} PROCESSORS ${np}
      LABELS "mpi;${ARG_LABELS}"
      ENVIRONMENT "${TESSEL_MPI_TEST_ENV}")
  endforeach()
endfunction()
