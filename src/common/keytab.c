/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keytab.c - the key-table helpers that config.c and lifecycle_rules.c share
 * (keytab.h): choices tables of enumerated values, "a, b, c" lists for the "allowed:" text
 * of an error, and the did-you-mean by edit distance. No state, no locks.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/keytab.h"

int config_choice_parse(const struct config_choice *t, const char *val, int *out)
{
    for (; t->name; t++) {
        if (strcmp(t->name, val) == 0) {
            *out = t->value;
            return 0;
        }
    }
    return -EINVAL;
}

const char *config_choice_name(const struct config_choice *t, int v)
{
    for (; t->name; t++)
        if (t->value == v)
            return t->name;
    return NULL;
}

/* Append name to the list in out (used bytes so far in *used); false once out is full. */
static bool list_add(char *out, size_t outsz, size_t *used, const char *name)
{
    int n = snprintf(out + *used, outsz - *used, "%s%s", *used ? ", " : "", name);
    if (n < 0 || (size_t)n >= outsz - *used) {
        out[*used] = '\0'; /* the cut falls on a name's boundary */
        return false;
    }
    *used += (size_t)n;
    return true;
}

void config_choice_list(const struct config_choice *t, char *out, size_t outsz)
{
    size_t used = 0;
    if (!outsz)
        return;
    out[0] = '\0';
    for (; t->name; t++)
        if (!list_add(out, outsz, &used, t->name))
            break;
}

void config_names_list(const char *const *names, size_t n, char *out, size_t outsz)
{
    size_t used = 0;
    if (!outsz)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (names[i] && !list_add(out, outsz, &used, names[i]))
            break;
}

/* Levenshtein distance, case-insensitive; 99 for words over 64 characters. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 99;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost =
                tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *config_key_closest(const char *word, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t bestd = 99;
    size_t wl = strlen(word);
    size_t limit = wl <= 3 ? 1 : (wl <= 6 ? 2 : 3);
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            continue;
        size_t d = edit_distance(word, names[i]);
        if (d <= limit && d < bestd) {
            best = names[i];
            bestd = d;
        }
    }
    return best;
}
