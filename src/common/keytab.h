/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keytab.h - what the key tables of tierd.conf share: config.c's tables (every section but
 * [policy]) and lifecycle_rules.c's (the [policy NAME] keys). An enumerated value is a choices
 * table, which both parses the value and writes the "allowed:" text of its error, so the two
 * cannot drift apart; an unknown key or section gets its did-you-mean from config_key_closest
 * (edit distance). No state: any thread.
 */
#ifndef TIER_COMMON_KEYTAB_H
#define TIER_COMMON_KEYTAB_H

#include <stddef.h>

/* One allowed value of an enumerated key; a table ends with {NULL, 0}. */
struct config_choice {
    const char *name;
    int value;
};

/* The value of the choice named val (exact, case-sensitive) into *out: 0, or -EINVAL (*out
 * untouched). */
int config_choice_parse(const struct config_choice *t, const char *val, int *out);

/* The name of the choice with value v, or NULL. */
const char *config_choice_name(const struct config_choice *t, int v);

/* The choices' names as "a, b, c", in table order, into out (cut at outsz - 1 bytes, on a
 * name's boundary). */
void config_choice_list(const struct config_choice *t, char *out, size_t outsz);

/* names[0..n) as "a, b, c" (NULL entries skipped) into out, cut as config_choice_list. */
void config_names_list(const char *const *names, size_t n, char *out, size_t outsz);

/* The one of names[0..n) closest to word by edit distance (case-insensitive) if it is close
 * enough to be a typo of it (1 edit for words up to 3 characters, 2 up to 6, 3 beyond), else
 * NULL. NULL entries are skipped; on a tie the first wins. */
const char *config_key_closest(const char *word, const char *const *names, size_t n);

#endif
