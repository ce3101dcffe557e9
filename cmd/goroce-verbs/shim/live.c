/*
 * live.c: the objects the preload has handed out and not yet destroyed
 * (shim.h), so that a verb called with a destroyed, foreign or NULL one
 * fails with EINVAL instead of reading memory that is no longer its own.
 * A hash set of pointers with their kinds, under one mutex: it is looked
 * up on the control path only.
 */
#include <stdlib.h>

#include "shim.h"

#define LIVE_BUCKETS 4096

struct live_node {
	const void *p;
	enum obj_kind kind;
	struct live_node *next;
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct live_node *live_buckets[LIVE_BUCKETS];

static struct live_node **bucket(const void *p)
{
	uintptr_t h = (uintptr_t)p;
	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15ull;
	return &live_buckets[(h >> 40) % LIVE_BUCKETS];
}

int live_add(const void *p, enum obj_kind k)
{
	struct live_node *n = malloc(sizeof *n);
	if (!n)
		return ENOMEM;
	n->p = p;
	n->kind = k;
	pthread_mutex_lock(&live_mu);
	struct live_node **b = bucket(p);
	n->next = *b;
	*b = n;
	pthread_mutex_unlock(&live_mu);
	return 0;
}

int live_del(const void *p, enum obj_kind k)
{
	struct live_node *gone = NULL;
	if (!p)
		return 0;
	pthread_mutex_lock(&live_mu);
	for (struct live_node **n = bucket(p); *n; n = &(*n)->next) {
		if ((*n)->p == p && (*n)->kind == k) {
			gone = *n;
			*n = gone->next;
			break;
		}
	}
	pthread_mutex_unlock(&live_mu);
	free(gone);
	return gone != NULL;
}

int live(const void *p, enum obj_kind k)
{
	int found = 0;
	if (!p)
		return 0;
	pthread_mutex_lock(&live_mu);
	for (struct live_node *n = *bucket(p); n; n = n->next) {
		if (n->p == p && n->kind == k) {
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&live_mu);
	return found;
}
