/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vec.c - tier_vec_grow() and tier_vec_resize() (vec.h).
 */
#include "common/vec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *grow_to(void *arr, size_t *cap, size_t ncap, size_t elsz)
{
    if (elsz && ncap > SIZE_MAX / elsz) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = realloc(arr, ncap * elsz);
    if (!p)
        return NULL;
    memset(p + *cap * elsz, 0, (ncap - *cap) * elsz);
    *cap = ncap;
    return p;
}

void *tier_vec_grow(void *arr, size_t *cap, size_t need, size_t elsz, size_t min)
{
    if (need <= *cap)
        return arr;
    size_t ncap = *cap ? *cap : (min ? min : 1);
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) {
            ncap = need;
            break;
        }
        ncap *= 2;
    }
    return grow_to(arr, cap, ncap, elsz);
}

void *tier_vec_resize(void *arr, size_t *cap, size_t need, size_t elsz)
{
    if (need <= *cap)
        return arr;
    return grow_to(arr, cap, need, elsz);
}
