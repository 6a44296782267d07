# `cmake --install <build> --prefix <dir>`: Loom's static libraries, the public headers and
# the CMake package, so that a project outside this tree does
#
#   find_package(Loom 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE Loom::loom)
#
# Layout: <prefix>/include/loom/{plan.h,loom_c.h,loom.h,builder.h}; the internal headers
# that builder.h and loom.h reach (ir/graph.h, driver/compile.h, ...) under
# <prefix>/include/loom/internal, which Loom::loom also puts on the include path;
# <prefix>/<libdir>/libloom_*.a; <prefix>/<libdir>/cmake/Loom/LoomConfig*.cmake.
#
# Static libraries, not one libloom.so (docs/api.md, "Why static"): Loom links cudart
# statically and reaches the driver through it, so a program gets one cudart whatever
# else it loads; building the libraries position-independent for a shared object would
# change every object file's flags for all builds; and a static link keeps the C ABI
# program self-contained (nothing of Loom to find at run time).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The version lives in one place, include/loom/loom_c.h (loom_version() returns it).
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/include/loom/loom_c.h _loom_version_lines
     REGEX "^#define LOOM_VERSION_(MAJOR|MINOR|PATCH) [0-9]+")
foreach(_line ${_loom_version_lines})
  string(REGEX REPLACE "^#define LOOM_VERSION_([A-Z]+) ([0-9]+).*" "\\1;\\2" _pair "${_line}")
  list(GET _pair 0 _part)
  list(GET _pair 1 _value)
  set(LOOM_VERSION_${_part} ${_value})
endforeach()
set(LOOM_VERSION "${LOOM_VERSION_MAJOR}.${LOOM_VERSION_MINOR}.${LOOM_VERSION_PATCH}")

# Dependents first: the link order of the static libraries.
set(LOOM_INSTALL_LIBRARIES loom_capi loom_api loom_tune loom_driver loom_bench loom_codegen
    loom_passes loom_atoms loom_frontend loom_runtime loom_ir)
install(TARGETS ${LOOM_INSTALL_LIBRARIES} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/loom DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/loom/internal
        FILES_MATCHING PATTERN "*.h")

# One imported static library per Loom library, each carrying the link dependencies it
# has here (Loom's own renamed Loom::<name>; CUDA::nvrtc, CUDA::cudart_static,
# CUDA::cublas, Threads::Threads, dl as they are), read from the targets so a library
# that gains a dependency needs no edit here.
set(LOOM_PACKAGE_TARGETS "")
foreach(_lib ${LOOM_INSTALL_LIBRARIES})
  get_target_property(_deps ${_lib} LINK_LIBRARIES)
  set(_iface "")
  foreach(_dep ${_deps})
    if(_dep IN_LIST LOOM_INSTALL_LIBRARIES)
      list(APPEND _iface "Loom::${_dep}")
    elseif(_dep)
      list(APPEND _iface "${_dep}")
    endif()
  endforeach()
  string(APPEND LOOM_PACKAGE_TARGETS
    "add_library(Loom::${_lib} STATIC IMPORTED)\n"
    "set_target_properties(Loom::${_lib} PROPERTIES\n"
    "  IMPORTED_LOCATION \"\${PACKAGE_PREFIX_DIR}/${CMAKE_INSTALL_LIBDIR}/"
    "${CMAKE_STATIC_LIBRARY_PREFIX}${_lib}${CMAKE_STATIC_LIBRARY_SUFFIX}\"\n"
    "  IMPORTED_LINK_INTERFACE_LANGUAGES CXX\n"
    "  INTERFACE_LINK_LIBRARIES \"${_iface}\")\n")
endforeach()

configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/LoomConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/LoomConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/LoomConfigVersion.cmake
  VERSION ${LOOM_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/LoomConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/LoomConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
