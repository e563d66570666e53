# SPDX-License-Identifier: Apache-2.0
# cmake/packaging.cmake - owns: the Debian package (`cpack -G DEB` in a build configured with
# -DCMAKE_INSTALL_PREFIX=/usr). Depends comes from the libraries the binaries link (dpkg-shlibdeps)
# plus adduser; the maintainer scripts of deploy/debian/ create the system user `fencegate`, enable
# the unit without starting it, and stop, disable and purge it on removal; the files under /etc are
# conffiles. tests/package/test_package.py builds, installs, runs and removes it.
# Must not: decide the install layout (cmake/install.cmake does).
set(CPACK_PACKAGE_NAME fencegate)
set(CPACK_PACKAGE_VENDOR "fencegate")
set(CPACK_PACKAGE_CONTACT "fencegate maintainers <fencegate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "fencing-aware storage gateway: leases with fencing tokens")
set(CPACK_PACKAGE_DESCRIPTION
    "fencegate hands out leases (locks and semaphores) with fencing tokens from Redis and proxies\n"
    "writes to Postgres tables and Redis keys, refusing any write whose fence is older than the\n"
    "newest stored for its resource, and records every refusal in an audit table.")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "redis-server, postgresql")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(fg_debian_dir ${CMAKE_BINARY_DIR}/debian)
file(WRITE ${fg_debian_dir}/conffiles "${FG_CONFIG_DIR}/fencegate.json\n")
foreach(script postinst prerm postrm)
  configure_file(${CMAKE_SOURCE_DIR}/deploy/debian/${script} ${fg_debian_dir}/${script} @ONLY
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                  WORLD_READ WORLD_EXECUTE)
endforeach()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${fg_debian_dir}/conffiles ${fg_debian_dir}/postinst
                                       ${fg_debian_dir}/prerm ${fg_debian_dir}/postrm)
include(CPack)
