# SPDX-License-Identifier: Apache-2.0
# The daemon's tenant registry from the config (tenants.c over src/tenant/).
target_sources(tierd_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tenants.c)
target_link_libraries(tierd_core PUBLIC tier_tenant)
