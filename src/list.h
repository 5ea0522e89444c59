/* SPDX-License-Identifier: MIT */
/*
 * Bucket lists: Kafka's TimerTaskList without the allocation. A circular
 * doubly linked list through the timers' own links, with a sentinel head in
 * the bucket, so unlinking any timer is O(1) and branch-free (Linux's
 * list_head).
 */
#ifndef TW_LIST_H
#define TW_LIST_H

#include "timingwheel/wheel.h"

static inline void list_init(struct tw_link *head)
{
	head->next = head;
	head->prev = head;
}

static inline bool list_empty(const struct tw_link *head)
{
	return head->next == head;
}

/* The store through prev between the two to node: the compiler cannot
 * tell that it misses node's fields, so it writes them as two plain
 * stores instead of building one vector store from two registers (four
 * instructions for two, on the add's path). */
static inline void list_append(struct tw_link *head, struct tw_link *node)
{
	struct tw_link *prev = head->prev;

	node->next = head;
	prev->next = node;
	node->prev = prev;
	head->prev = node;
}

static inline void list_unlink(struct tw_link *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	node->next = node->prev = NULL;
}

static inline struct tw_timer *list_timer(struct tw_link *node)
{
	return tw_container_of(node, struct tw_timer, link);
}

#endif
