/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_member.c - libFuzzer target for the cluster's omap entries (cluster/member_entry.h:
 * member_entry_parse), which every member reads from the shared RADOS object, where any node (or
 * anyone with the pool's key) may have written them. Any input either parses into an entry with
 * a valid id, a printable address and a positive finite weight, which formats and parses again
 * to the same entry, or fails with -EINVAL leaving the output untouched.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/member_entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    struct member_entry e, before;
    memset(&e, 0xa5, sizeof(e));
    before = e;
    int rc = member_entry_parse((const char *)data, size, &e);
    if (rc != 0) {
        if (rc != -EINVAL || memcmp(&e, &before, sizeof(e)) != 0)
            abort();
        return 0;
    }
    if (!member_id_valid(e.id) || strlen(e.addr) > MEMBER_ADDR_MAX || !isfinite(e.weight) ||
        !(e.weight > 0))
        abort();
    for (const char *p = e.addr; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            abort();
    char buf[512];
    ssize_t n = member_entry_format(&e, buf, sizeof(buf));
    if (n <= 0)
        abort();
    struct member_entry again;
    if (member_entry_parse(buf, (size_t)n, &again) != 0)
        abort();
    if (strcmp(again.id, e.id) != 0 || strcmp(again.addr, e.addr) != 0 ||
        again.weight != e.weight || again.incarnation != e.incarnation)
        abort();
    return 0;
}
