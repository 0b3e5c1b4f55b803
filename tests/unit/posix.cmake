# SPDX-License-Identifier: Apache-2.0
# POSIX directory backend on real files (src/tiers/posix.c). Mounts a tiny tmpfs when run as root.
tier_unit_test(test_posix SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_posix.c LIBS tier_tiers)
