# SPDX-License-Identifier: Apache-2.0
# cmake/hardening.cmake - owns: the hardening flags of optimized builds, the ones Debian's
# dpkg-buildflags gives with hardening=+all: _FORTIFY_SOURCE=2, -fstack-protector-strong,
# -Wformat -Werror=format-security, PIE, full RELRO and immediate binding (-z relro -z now).
# tests/package/test_package.py checks them on a built binary with readelf.
# Must not: change warnings or sanitizer flags (CMakeLists.txt owns those).
include(CheckPIESupported)
check_pie_supported(LANGUAGES C)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

set(FG_OPTIMIZED "$<OR:$<CONFIG:Release>,$<CONFIG:RelWithDebInfo>,$<CONFIG:MinSizeRel>>")
# _FORTIFY_SOURCE needs optimization; Debug builds (the sanitizer test build) go without it.
add_compile_options("$<${FG_OPTIMIZED}:-U_FORTIFY_SOURCE;-D_FORTIFY_SOURCE=2>"
                    "$<${FG_OPTIMIZED}:-fstack-protector-strong;-Werror=format-security>")
add_link_options("$<${FG_OPTIMIZED}:LINKER:-z,relro;LINKER:-z,now>")
