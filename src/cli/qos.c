/* SPDX-License-Identifier: Apache-2.0 */
/*
 * qos.c - `tierctl qos` (qos.h): rates from two GET /v1/qos answers, and the table. Pure; the
 * caller owns the JSON.
 */
#include "cli/qos.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/strutil.h"

static uint64_t jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* The element of array arr whose key is the string val, or NULL. */
static const json_t *find_by(const json_t *arr, const char *key, const char *val)
{
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *s = json_string_value(json_object_get(e, key));
        if (s && val && strcmp(s, val) == 0)
            return e;
    }
    return NULL;
}

static void set_delivered(json_t *cur, const json_t *prev, double span_s)
{
    uint64_t b = jnum(cur, "granted_bytes"), pb = jnum(prev, "granted_bytes");
    uint64_t o = jnum(cur, "grants"), po = jnum(prev, "grants");
    /* a counter that went back (tierd restarted in between) counts from 0 */
    double bytes = (double)(b >= pb ? b - pb : b), ops = (double)(o >= po ? o - po : o);
    json_object_set_new(
        cur, "delivered",
        json_pack("{s:f, s:f}", "bytes_per_s", bytes / span_s, "ops_per_s", ops / span_s));
}

/* Every tenant and class entry of lane b (of cur) from pb, the same lane in prev (may be NULL). */
static void lane_rates(json_t *b, const json_t *pb, double span_s)
{
    size_t k;
    json_t *t;
    json_array_foreach(json_object_get(b, "tenants"), k, t)
    {
        const json_t *pt = find_by(json_object_get(pb, "tenants"), "name",
                                   json_string_value(json_object_get(t, "name")));
        set_delivered(t, pt, span_s);
        const char *cn;
        json_t *c;
        json_object_foreach(json_object_get(t, "classes"), cn, c)
        {
            set_delivered(c, json_object_get(json_object_get(pt, "classes"), cn), span_s);
        }
    }
}

int ctl_qos_rates(const json_t *prev, json_t *cur)
{
    uint64_t t0 = jnum(prev, "now_ns"), t1 = jnum(cur, "now_ns");
    if (!t0 || t1 <= t0)
        return -EINVAL;
    double span_s = (double)(t1 - t0) / 1e9;
    json_object_set_new(cur, "interval_s", json_real(span_s));
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(cur, "backends"), i, b)
    {
        lane_rates(b,
                   find_by(json_object_get(prev, "backends"), "name",
                           json_string_value(json_object_get(b, "name"))),
                   span_s);
    }
    json_t *disk = json_object_get(cur, "disk");
    if (json_is_object(disk))
        lane_rates(disk, json_object_get(prev, "disk"), span_s);
    json_t *peers = json_object_get(cur, "peers");
    if (json_is_object(peers))
        lane_rates(peers, json_object_get(prev, "peers"), span_s);
    return 0;
}

/* A rate for the table: "-" for none, else like "100MiB/s". */
static const char *rate_text(const json_t *v, bool zero_is_none, char *buf, size_t n)
{
    uint64_t bps =
        json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    if (json_is_null(v) || !v || (zero_is_none && bps == 0)) {
        tier_strlcpy(buf, "-", n);
        return buf;
    }
    char b[32];
    snprintf(buf, n, "%s/s", tier_fmt_bytes(bps, b, sizeof(b)));
    return buf;
}

/* The rows of lane b, named ln in the table. */
static void print_lane(const json_t *b, const char *ln, FILE *f)
{
    size_t k;
    const json_t *t;
    json_array_foreach(json_object_get(b, "tenants"), k, t)
    {
        const char *tn = json_string_value(json_object_get(t, "name"));
        const char *own_cls = json_string_value(json_object_get(t, "class"));
        const char *cn;
        const json_t *c;
        json_object_foreach((json_t *)(uintptr_t)json_object_get(t, "classes"), cn, c)
        {
            const json_t *dv = json_object_get(c, "delivered");
            double bps = json_number_value(json_object_get(dv, "bytes_per_s"));
            double ops = json_number_value(json_object_get(dv, "ops_per_s"));
            bool show = (own_cls && strcmp(cn, own_cls) == 0) ||
                        json_is_true(json_object_get(c, "own")) ||
                        json_is_true(json_object_get(c, "lane_own")) || bps > 0 || ops > 0;
            if (!show)
                continue;
            char r[32], l[32], tl[32], d[32], db[32];
            if (dv)
                snprintf(d, sizeof(d), "%s/s", tier_fmt_bytes((uint64_t)bps, db, sizeof(db)));
            else
                tier_strlcpy(d, "?", sizeof(d));
            fprintf(f, "%-12s %-16s %-11s %-12s %-6lld %-12s %-12s %-12s %.1f\n", ln, tn ? tn : "?",
                    cn, rate_text(json_object_get(c, "reservation"), true, r, sizeof(r)),
                    (long long)json_integer_value(json_object_get(c, "weight")),
                    rate_text(json_object_get(c, "limit"), false, l, sizeof(l)),
                    rate_text(json_object_get(t, "limit"), false, tl, sizeof(tl)), d,
                    dv ? ops : 0.0);
        }
    }
}

void ctl_qos_print(const json_t *cur, FILE *f)
{
    const json_t *iv = json_object_get(cur, "interval_s");
    if (json_is_number(iv))
        fprintf(f, "delivered: granted by each lane over the last %.1f s\n\n",
                json_number_value(iv));
    fprintf(f, "%-12s %-16s %-11s %-12s %-6s %-12s %-12s %-12s %s\n", "LANE", "TENANT", "CLASS",
            "RESERVATION", "WEIGHT", "LIMIT", "TENANT-LIM", "DELIVERED", "OPS/S");
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(cur, "backends"), i, b)
    {
        const char *bn = json_string_value(json_object_get(b, "name"));
        print_lane(b, bn ? bn : "?", f);
    }
    const json_t *disk = json_object_get(cur, "disk");
    if (json_is_object(disk))
        print_lane(disk, CTL_QOS_DISK_LANE, f);
    const json_t *peers = json_object_get(cur, "peers");
    if (json_is_object(peers))
        print_lane(peers, CTL_QOS_PEERS_LANE, f);
    const json_t *space = json_object_get(cur, "space");
    if (json_array_size(space) == 0)
        return;
    fprintf(f, "\n%-16s %-12s %-12s %s\n", "TENANT", "CACHE-QUOTA", "CACHED", "QUOTA-EVICTIONS");
    json_array_foreach(space, i, b)
    {
        const char *tn = json_string_value(json_object_get(b, "name"));
        uint64_t q = (uint64_t)json_integer_value(json_object_get(b, "quota"));
        char qb[32], hb[32];
        fprintf(f, "%-16s %-12s %-12s %lld\n", tn ? tn : "?",
                q ? tier_fmt_bytes(q, qb, sizeof(qb)) : "-",
                tier_fmt_bytes((uint64_t)json_integer_value(json_object_get(b, "bytes")), hb,
                               sizeof(hb)),
                (long long)json_integer_value(json_object_get(b, "quota_evictions")));
    }
}
