# SPDX-License-Identifier: Apache-2.0
# Job admission (jobs.h): part of the daemon core library, included by this directory's
# CMakeLists. It reserves hot-tier space and bandwidth, queues, and pins and stages through the
# cache and the stager (jobs_ops_tierd).
target_sources(tierd_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/jobs.c)
