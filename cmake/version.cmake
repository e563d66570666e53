# SPDX-License-Identifier: Apache-2.0
# cmake/version.cmake - owns: the one version of fencegate, PROJECT_VERSION from project() in
# CMakeLists.txt. The binaries get it as FG_VERSION (fencegate --version, fencectl --version, /metrics
# fencegate_build_info); the OpenAPI document must state the same info.version, checked here at
# configure time so the two cannot drift. The source revision (fencegate_build_info{revision}) is
# FG_REVISION of the generated revision.h, which the fg_revision target refreshes at each build
# (cmake/revision.cmake). Must not: define the version anywhere else.
add_compile_definitions(FG_VERSION="${PROJECT_VERSION}")

file(READ ${CMAKE_SOURCE_DIR}/openapi/openapi.json fg_openapi_text)
string(JSON fg_openapi_version ERROR_VARIABLE fg_openapi_error GET "${fg_openapi_text}" info version)
if(fg_openapi_error OR NOT fg_openapi_version STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "openapi/openapi.json info.version is '${fg_openapi_version}', but the "
                      "project version is ${PROJECT_VERSION} (set both to the same value)")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/openapi/openapi.json)

add_custom_target(fg_revision
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -DOUT=${CMAKE_BINARY_DIR}/generated/revision.h
          -P ${CMAKE_SOURCE_DIR}/cmake/revision.cmake
  BYPRODUCTS ${CMAKE_BINARY_DIR}/generated/revision.h
  COMMENT "Reading the source revision")
