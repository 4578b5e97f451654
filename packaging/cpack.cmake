# packaging/cpack.cmake: CPack settings for the Debian package.
# Included at the end of the top-level CMakeLists.txt, after every install()
# rule is known. `cmake --build build --target package` writes the .deb into
# build/. Runtime dependencies are listed by hand (Debian 12 package names)
# instead of being derived with dpkg-shlibdeps.

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "wcodecfs")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "wcodecfs authors")
set(CPACK_PACKAGE_CONTACT "wcodecfs authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Compressed storage for neural-network checkpoints, served as ordinary files")
set(CPACK_PACKAGE_DESCRIPTION
    "wcodecfs stores model checkpoints (safetensors, GGUF) compressed with a lossless weight codec and serves the original files. This package contains the wcodec command-line tool (encode, decode, verify, inspect, bench), the wcodecfs FUSE daemon with its mount.wcodecfs helper for /etc/fstab, and a systemd unit example.")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")

set(CPACK_DEBIAN_PACKAGE_MAINTAINER "wcodecfs authors")
set(CPACK_DEBIAN_PACKAGE_SECTION "utils")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libzstd1, liblz4-1, libxxhash0, libssl3, zlib1g, libfuse3-3, fuse3")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)

include(CPack)
