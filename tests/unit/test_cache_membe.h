/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_membe.h - an in-memory backend for the cache tests: objects with procedural
 * content (a function of key, etag and offset, so any process can check any byte), a fetch
 * counter, and injectable errors and latency. Only read and stat are implemented.
 */
#ifndef TIER_TEST_CACHE_MEMBE_H
#define TIER_TEST_CACHE_MEMBE_H

#include <stdint.h>
#include <stddef.h>

#include "tiers/backend.h"

struct backend *membe_new(const char *name);
/* Add or replace an object (a new etag changes its content). */
void membe_add(struct backend *be, const char *key, uint64_t size, const char *etag);
/* Expected bytes of (key, etag) at [off, off+len). */
void membe_expected(const char *key, const char *etag, uint64_t off, void *buf, size_t len);
uint64_t membe_reads(struct backend *be);
/* Fail the next count reads with err (negative errno). */
void membe_fail_next(struct backend *be, int err, int count);
/* Every read sleeps this long first (simulated network latency). */
void membe_set_latency_us(struct backend *be, unsigned us);

#endif
