# SPDX-License-Identifier: Apache-2.0
# Tenant registry and caller resolution (src/tenant/tenant*.c): recorded cgroup texts, rules, the
# cap, the pid cache over a fake /proc tree and its pidfd check on real child processes and
# threads. Labelled tsan: it has concurrent resolution tests.
tier_unit_test(test_tenant SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_tenant.c
  LIBS tier_tenant LABELS tsan)
