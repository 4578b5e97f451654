# packaging/fuse_install.cmake: install rules of the mount (included from
# mount/CMakeLists.txt). With CPack's /usr prefix the .deb carries
#   /usr/bin/wcodecfs                        the daemon
#   /usr/sbin/mount.wcodecfs                 mount(8) helper (type wcodecfs)
#   /usr/sbin/mount.fuse.wcodecfs -> mount.wcodecfs   (type fuse.wcodecfs)
#   /usr/lib/systemd/system/wcodecfs@.service         template unit (not enabled)
#   /usr/share/doc/wcodecfs/examples/models.mount.example
include(GNUInstallDirs)

install(TARGETS wcodecfs RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/packaging/mount.wcodecfs DESTINATION ${CMAKE_INSTALL_SBINDIR})

# The link is made in the build tree and installed as a link.
file(CREATE_LINK mount.wcodecfs ${CMAKE_CURRENT_BINARY_DIR}/mount.fuse.wcodecfs SYMBOLIC)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mount.fuse.wcodecfs DESTINATION ${CMAKE_INSTALL_SBINDIR})

install(FILES ${PROJECT_SOURCE_DIR}/packaging/wcodecfs@.service DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/models.mount.example
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
