# SPDX-License-Identifier: Apache-2.0
# Tenant registry and caller resolution (src/tenant/tenant.c): recorded cgroup texts, rules, the
# cap, the pid cache over a fake /proc tree. Labelled tsan: it has a concurrent resolution test.
tier_unit_test(test_tenant SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_tenant.c
  LIBS tier_tenant LABELS tsan)
