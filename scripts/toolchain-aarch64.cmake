# CMake toolchain file: cross-build for aarch64 (arm64) Linux with Debian's
# cross compiler, against the arm64 libraries installed through multiarch
# (dpkg --add-architecture arm64; scripts/test_aarch64.sh installs both).
#   cmake -S . -B build-aarch64 -G Ninja \
#         -DCMAKE_TOOLCHAIN_FILE=scripts/toolchain-aarch64.cmake
# Programs built here (the tests; gtest_discover_tests at build time; ctest)
# run under qemu-user through CMAKE_CROSSCOMPILING_EMULATOR.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(WCODEC_AARCH64_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${WCODEC_AARCH64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${WCODEC_AARCH64_TRIPLE}-g++)

# The programs run with the arm64 multiarch runtime (libc6:arm64,
# libstdc++6:arm64: /lib/ld-linux-aarch64.so.1 and /lib/aarch64-linux-gnu),
# the same build as the arm64 libraries they link. Not -L
# /usr/aarch64-linux-gnu: that takes the cross toolchain's dynamic loader,
# which then loads the multiarch libc.so.6 of another build, and under it
# the first pthread_create spins forever.
find_program(WCODEC_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${WCODEC_QEMU_AARCH64})

# Headers and libraries: the multiarch paths (/usr/include is shared, the
# arm64 libraries are in /usr/lib/aarch64-linux-gnu; CMake's Debian
# multiarch support picks the library directory from the compiler's
# CMAKE_LIBRARY_ARCHITECTURE). Programs come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${WCODEC_AARCH64_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config: the arm64 .pc files only (libzstd, liblz4, libxxhash).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${WCODEC_AARCH64_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
