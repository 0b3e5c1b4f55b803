/* SPDX-License-Identifier: Apache-2.0 */
/* member_entry.c - the JSON of one member's omap entry (member_entry.h), with jansson. Pure
 * functions, no state. */
#include "cluster/member_entry.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "common/strutil.h"

int member_id_valid(const char *id)
{
    size_t n = strlen(id);
    return n <= MEMBER_ID_MAX && tier_name_chars(id, n);
}

static int addr_valid(const char *addr)
{
    size_t n = strlen(addr);
    if (n > MEMBER_ADDR_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (addr[i] < 0x21 || addr[i] > 0x7e)
            return 0;
    return 1;
}

static int weight_valid(double w)
{
    return isfinite(w) && w > 0 && w <= MEMBER_WEIGHT_MAX;
}

int member_entry_parse(const char *json, size_t len, struct member_entry *out)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL)
        return -EINVAL;
    int rc = -EINVAL;
    json_t *id = json_object_get(root, "id"), *addr = json_object_get(root, "addr");
    json_t *w = json_object_get(root, "weight"), *inc = json_object_get(root, "incarnation");
    if (!json_is_object(root) || json_object_size(root) != 4 || !json_is_string(id) ||
        !json_is_string(addr) || !json_is_number(w) || !json_is_integer(inc))
        goto out;
    const char *ids = json_string_value(id), *as = json_string_value(addr);
    /* An embedded NUL would make the C string shorter than the JSON one. */
    if (strlen(ids) != json_string_length(id) || strlen(as) != json_string_length(addr))
        goto out;
    if (!member_id_valid(ids) || !addr_valid(as) || !weight_valid(json_number_value(w)) ||
        json_integer_value(inc) < 0)
        goto out;
    tier_strlcpy(out->id, ids, sizeof(out->id));
    tier_strlcpy(out->addr, as, sizeof(out->addr));
    out->weight = json_number_value(w);
    out->incarnation = (uint64_t)json_integer_value(inc);
    rc = 0;
out:
    json_decref(root);
    return rc;
}

ssize_t member_entry_format(const struct member_entry *e, char *buf, size_t size)
{
    if (!member_id_valid(e->id) || !addr_valid(e->addr) || !weight_valid(e->weight) ||
        e->incarnation > INT64_MAX)
        return -EINVAL;
    json_t *o = json_pack("{s:s, s:s, s:f, s:I}", "id", e->id, "addr", e->addr, "weight", e->weight,
                          "incarnation", (json_int_t)e->incarnation);
    if (o == NULL)
        return -ENOMEM;
    size_t need = json_dumpb(o, NULL, 0, JSON_COMPACT);
    ssize_t rc = -ENOSPC;
    if (need > 0 && need < size) {
        json_dumpb(o, buf, size, JSON_COMPACT);
        buf[need] = '\0';
        rc = (ssize_t)need;
    }
    json_decref(o);
    return rc;
}
