/* SPDX-License-Identifier: Apache-2.0 */
/*
 * list.h - an intrusive, circular, doubly linked list (the idiom of libuv's queue.h and the
 * Linux kernel's list.h): the one place that links and unlinks, instead of hand-written prev/next
 * updates at each site.
 *
 * A list is a struct tier_list head; each element embeds a struct tier_list link and is found
 * from it with tier_list_entry(). An empty list's head points to itself. A removed link points to
 * itself too, so tier_list_linked() tells whether an element is on a list and removing it twice
 * is harmless.
 *
 *     struct req { ...; struct tier_list link; };
 *     struct tier_list q;
 *     tier_list_init(&q);
 *     tier_list_push_tail(&q, &r->link);
 *     struct req *first = tier_list_entry(tier_list_first(&q), struct req, link);
 *     tier_list_remove(&first->link);
 *
 * Not thread-safe: the owner holds whatever lock guards the list. Iterating while removing the
 * current element needs tier_list_foreach_safe().
 */
#ifndef TIER_COMMON_LIST_H
#define TIER_COMMON_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct tier_list {
    struct tier_list *prev, *next;
};

#define tier_list_entry(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* A head or a link not on any list: points to itself. */
static inline void tier_list_init(struct tier_list *l)
{
    l->prev = l->next = l;
}

static inline bool tier_list_empty(const struct tier_list *head)
{
    return head->next == head;
}

/* Is the link on a list (initialised with tier_list_init or removed: false)? */
static inline bool tier_list_linked(const struct tier_list *l)
{
    return l->next != l;
}

/* The first / last element's link, or NULL when the list is empty. */
static inline struct tier_list *tier_list_first(const struct tier_list *head)
{
    return head->next == head ? NULL : head->next;
}

static inline struct tier_list *tier_list_last(const struct tier_list *head)
{
    return head->prev == head ? NULL : head->prev;
}

/* Insert n between a and b (adjacent). */
static inline void tier_list_insert_(struct tier_list *a, struct tier_list *n, struct tier_list *b)
{
    n->prev = a;
    n->next = b;
    a->next = n;
    b->prev = n;
}

static inline void tier_list_push_head(struct tier_list *head, struct tier_list *n)
{
    tier_list_insert_(head, n, head->next);
}

static inline void tier_list_push_tail(struct tier_list *head, struct tier_list *n)
{
    tier_list_insert_(head->prev, n, head);
}

/* Unlink n from its list (a no-op when it is on none) and leave it pointing to itself. */
static inline void tier_list_remove(struct tier_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    tier_list_init(n);
}

/* The element after / before l on the list of head, or NULL at the end. */
static inline struct tier_list *tier_list_next(const struct tier_list *head,
                                               const struct tier_list *l)
{
    return l->next == head ? NULL : l->next;
}

static inline struct tier_list *tier_list_prev(const struct tier_list *head,
                                               const struct tier_list *l)
{
    return l->prev == head ? NULL : l->prev;
}

/* for (each link l of head, first to last); l must not be removed inside the loop */
#define tier_list_foreach(l, head) for ((l) = (head)->next; (l) != (head); (l) = (l)->next)

/* the same, where the body may remove (and free) l: tmp holds the next link */
#define tier_list_foreach_safe(l, tmp, head)                                                       \
    for ((l) = (head)->next, (tmp) = (l)->next; (l) != (head); (l) = (tmp), (tmp) = (l)->next)

#endif
