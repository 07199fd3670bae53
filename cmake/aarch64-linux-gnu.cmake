# Cross-compiling Kiln for 64-bit ARM Linux (aarch64) with Debian's cross toolchain
# (g++-aarch64-linux-gnu, its C and C++ runtime in /usr/aarch64-linux-gnu) and arm64 libraries:
# FlatBuffers and googletest installed by multiarch (apt-get install libflatbuffers-dev:arm64
# libgtest-dev:arm64, beside the amd64 ones), XNNPACK and pthreadpool unpacked into a sysroot
# (the environment variable KILN_ARM64_SYSROOT): their Debian packages are not Multi-Arch:
# same, so installing the arm64 ones would remove the host's.
# Usage: KILN_ARM64_SYSROOT=DIR cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#        -DKILN_TOOLCHAIN=OFF
# scripts/test_arm64.sh makes the sysroot, builds with this file and runs the tests under
# qemu-aarch64.
# The sysroot is remembered in the cache, so a later re-run of CMake (the build re-configures
# itself when a CMakeLists.txt changes) finds it without the environment variable.
if(DEFINED ENV{KILN_ARM64_SYSROOT})
  set(KILN_ARM64_SYSROOT "$ENV{KILN_ARM64_SYSROOT}" CACHE PATH "arm64 sysroot holding XNNPACK, pthreadpool, cpuinfo" FORCE)
elseif(KILN_ARM64_SYSROOT)
  set(ENV{KILN_ARM64_SYSROOT} "${KILN_ARM64_SYSROOT}")
endif()
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Libraries and CMake packages of the target only; programs (flatc, pkg-config) of the host.
set(CMAKE_FIND_ROOT_PATH "$ENV{KILN_ARM64_SYSROOT}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
# Tests run under emulation: ctest prefixes each test command with this. The loader and libc
# are the multiarch libc6:arm64 (prefix /), not the cross toolchain's copy in
# /usr/aarch64-linux-gnu: that older build's ld.so with the multiarch libc.so.6 (which the
# library cache finds) hangs in the first pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/;-E;LD_LIBRARY_PATH=$ENV{KILN_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu)
