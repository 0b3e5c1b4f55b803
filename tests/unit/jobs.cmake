# SPDX-License-Identifier: Apache-2.0
# Job admission (src/jobs/jobs.c) over fake ops: the capacity model, the FIFO queue without
# overtaking, bandwidth per backend link, reference-counted pins, idempotent retries. The real
# mount is tests/integration/test_jobs_fuse.sh.
if(TARGET tierd_core AND TARGET tier_cache)
  tier_unit_test(test_jobs SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_jobs.c
    LIBS tier_fakejobs tierd_core tier_qos tier_cache tier_tiers)
endif()
