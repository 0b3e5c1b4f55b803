# SPDX-License-Identifier: Apache-2.0
# Staging jobs (stage.h): part of the daemon core library, included by this directory's
# CMakeLists. The stager calls the cache and the backends, and its fetches pass the QoS point.
target_sources(tierd_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/stage.c)
