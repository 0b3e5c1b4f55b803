# SPDX-License-Identifier: Apache-2.0
# Log-linear latency histogram (owner: tierbench; reused by daemon telemetry).
target_sources(tier_common PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/hist.c)
