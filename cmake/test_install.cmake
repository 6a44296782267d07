# ctest install_package (label cpu): the installed package works for a project outside
# this tree. Installs BUILD into a scratch prefix, then configures, builds and runs
# examples/cpp and examples/c against it with find_package(Loom). Without a GPU each
# example prints why and its compiled plan's description, and exits 0. Last, a project
# asking for Loom 99.0 must fail to configure (the version file works).
#   cmake -DBUILD=<build> -DSOURCE=<source> -DCXX=<c++> -DCUDA_ROOT=<toolkit> -DGEN=<generator>
#         -DCXXFLAGS=<flags> -DLDFLAGS=<flags> -P test_install.cmake   (the build's own flags:
#         a sanitizer build's libraries need the examples built and linked the same way)
set(work ${BUILD}/install_package)
file(REMOVE_RECURSE ${work})
set(prefix ${work}/prefix)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}")
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${err}")
  endif()
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
foreach(lang cpp c)
  set(b ${work}/${lang})
  step(${CMAKE_COMMAND} -S ${SOURCE}/examples/${lang} -B ${b} -G ${GEN}
       -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
       -DCMAKE_CXX_COMPILER=${CXX} -DCUDAToolkit_ROOT=${CUDA_ROOT}
       "-DCMAKE_CXX_FLAGS=${CXXFLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LDFLAGS}")
  step(${CMAKE_COMMAND} --build ${b})
  step(${b}/loom_example_${lang})
endforeach()

set(v ${work}/version)
file(WRITE ${v}/CMakeLists.txt "cmake_minimum_required(VERSION 3.24)\nproject(v LANGUAGES CXX)\nfind_package(Loom 99.0 REQUIRED)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${v} -B ${v}/build -G ${GEN} -DCMAKE_PREFIX_PATH=${prefix}
                -DCMAKE_CXX_COMPILER=${CXX} RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "version")
  message(FATAL_ERROR "find_package(Loom 99.0) should fail on the version (rc ${rc}):\n${err}")
endif()
