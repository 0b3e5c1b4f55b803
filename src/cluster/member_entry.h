/* SPDX-License-Identifier: Apache-2.0 */
/* member_entry.h - one member's record in the cluster object's omap (member.c): the value of key
 * `node.ID`, a small JSON object
 *     {"id":"gpu-07","addr":"10.0.0.7:7070","weight":2.0,"incarnation":1764740000123456789}
 * Parsing is strict (every field present with its type, nothing else, an id of [A-Za-z0-9._-])
 * because the object is shared by every node: a bad entry written by one must not crash another.
 * No librados here, so the parser is fuzzed (tests/fuzz/fuzz_member.c) without a cluster. */
#ifndef TIER_CLUSTER_MEMBER_ENTRY_H
#define TIER_CLUSTER_MEMBER_ENTRY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MEMBER_ID_MAX 63       /* bytes of an id, without the NUL */
#define MEMBER_ADDR_MAX 127    /* bytes of an address, without the NUL */
#define MEMBER_WEIGHT_MAX 1e15 /* the largest weight an entry may carry */

struct member_entry {
    char id[MEMBER_ID_MAX + 1];     /* [A-Za-z0-9._-]{1,63} */
    char addr[MEMBER_ADDR_MAX + 1]; /* the peer endpoint, printable ASCII, may be empty */
    double weight;        /* > 0, <= MEMBER_WEIGHT_MAX: its share of placement (place.h) */
    uint64_t incarnation; /* new at each join: the cookie of its lock */
};

/* Whether id is a valid member id (1..63 of [A-Za-z0-9._-]). */
int member_id_valid(const char *id);

/* Parses len bytes of JSON into *out. 0, or -EINVAL (not the shape above; *out untouched). */
int member_entry_parse(const char *json, size_t len, struct member_entry *out);

/* Writes e as JSON into buf (NUL-terminated). Returns its length, -EINVAL for an entry that
 * member_entry_parse() would refuse, or -ENOSPC when size is too small. */
ssize_t member_entry_format(const struct member_entry *e, char *buf, size_t size);

#endif
