/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ioctx.c - class names and the per-thread current ioctx (see ioctx.h). The current ioctx is a
 * plain thread-local copy: set and restored by the backend dispatchers around each call, read by
 * the scheduler's wrapper. No shared state.
 */
#include "common/ioctx.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static _Thread_local struct tier_ioctx t_io;
static _Thread_local bool t_set;
static _Thread_local uint64_t t_calls;

uint64_t tier_backend_calls(void)
{
    return t_calls;
}

void tier_backend_call_note(void)
{
    t_calls++;
}

int tier_io_class_parse(const char *name, enum tier_io_class *out)
{
    if (!name)
        return -EINVAL;
    for (int i = 0; i < TIER_IO_NCLASSES; i++) {
        if (strcmp(name, tier_io_class_name((enum tier_io_class)i)) == 0 ||
            strcmp(name, tier_io_class_legacy_name((enum tier_io_class)i)) == 0) {
            *out = (enum tier_io_class)i;
            return 0;
        }
    }
    return -EINVAL;
}

const struct tier_ioctx *tier_ioctx_current(void)
{
    return t_set ? &t_io : NULL;
}

struct tier_ioctx_saved tier_ioctx_swap(const struct tier_ioctx *io)
{
    struct tier_ioctx_saved prev = {.io = t_io, .set = t_set};
    if (io) {
        t_io = *io;
        t_set = true;
    } else {
        t_set = false;
    }
    return prev;
}

void tier_ioctx_restore(struct tier_ioctx_saved saved)
{
    t_io = saved.io;
    t_set = saved.set != 0;
}
