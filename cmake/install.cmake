# SPDX-License-Identifier: Apache-2.0
# cmake/install.cmake - owns: where `cmake --install` puts things (GNUInstallDirs):
#   bin/fencegate, bin/fencectl                      the binaries (migrations, scripts and the OpenAPI
#                                                    document are compiled in: nothing else is read)
#   <sysconfdir>/fencegate/fencegate.json            example configuration (deploy/fencegate.json)
#   <systemd unit dir>/fencegate.service             from deploy/fencegate.service.in
#   share/man/man8/fencegate.8.gz, man1/fencectl.1.gz from man/*.in (the version filled in)
#   share/bash-completion/completions/fencectl       from deploy/fencectl.bash-completion
#   share/doc/fencegate/                             README, CHANGELOG, LICENSE, docs/*.md
# With the prefix /usr, sysconfdir is /etc and the unit directory /lib/systemd/system (Debian's).
# Must not: install anything the binaries read from the source tree (they read nothing from it).
include(GNUInstallDirs)

if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(fg_unit_dir_default /lib/systemd/system)
else()
  set(fg_unit_dir_default ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
endif()
set(FG_SYSTEMD_UNIT_DIR ${fg_unit_dir_default} CACHE PATH "Where the systemd unit is installed")
set(FG_CONFIG_DIR ${CMAKE_INSTALL_FULL_SYSCONFDIR}/fencegate)

configure_file(${CMAKE_SOURCE_DIR}/deploy/fencegate.service.in ${CMAKE_BINARY_DIR}/fencegate.service
               @ONLY)
# Man pages are installed gzip-compressed, as Debian's policy asks (-n: the same bytes on every build).
set(fg_man_pages fencegate.8 fencectl.1)
set(fg_man_gz)
foreach(page ${fg_man_pages})
  configure_file(${CMAKE_SOURCE_DIR}/man/${page}.in ${CMAKE_BINARY_DIR}/man/${page} @ONLY)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/${page}.gz
                     COMMAND gzip -9 -n -c ${CMAKE_BINARY_DIR}/man/${page} > ${CMAKE_BINARY_DIR}/man/${page}.gz
                     DEPENDS ${CMAKE_BINARY_DIR}/man/${page})
  list(APPEND fg_man_gz ${CMAKE_BINARY_DIR}/man/${page}.gz)
endforeach()
add_custom_target(manpages ALL DEPENDS ${fg_man_gz})

install(TARGETS fencegate fencectl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/deploy/fencegate.json DESTINATION ${FG_CONFIG_DIR}
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ)
install(FILES ${CMAKE_BINARY_DIR}/fencegate.service DESTINATION ${FG_SYSTEMD_UNIT_DIR})
install(FILES ${CMAKE_BINARY_DIR}/man/fencegate.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${CMAKE_BINARY_DIR}/man/fencectl.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/fencectl.bash-completion
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME fencectl)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/CHANGELOG.md
              ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md")
