/*
 * Kernel invalidations (inval.h) from a thread of their own, so that no
 * FUSE request waits on the directory lock an invalidation takes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inval.h"
#include "log.h"

#define TAG "inval"

struct item {
	fuse_ino_t parent; /* 0: an ack of seq */
	uint64_t seq;
	size_t len; /* 0: the inode itself */
	struct item *next;
	char name[];
};

struct inval {
	struct fuse_session *se;
	void (*ack)(void *arg, uint64_t seq);
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct item *head, **tail;
	bool stop;
	bool no_expire; /* the kernel cannot expire a name (inval thread) */
	pthread_t thread;
};

/*
 * A name another client changed: expired, so that the kernel looks it up
 * before it next uses it, which then drops it (and what it caches below
 * it) if it is gone. Dropping it now (d_invalidate()) would prune that
 * subtree before the master hears the ack: for an rmr of a tree this
 * mount listed, one walk of every cached name below, in the kernel,
 * while the rmr waits. Kernels before 6.2 (protocol 7.38) cannot
 * expire: they drop it.
 */
static void inval_name(struct inval *iv, const struct item *it)
{
	if (!iv->no_expire && fuse_lowlevel_notify_expire_entry(
				      iv->se, it->parent, it->name, it->len,
				      FUSE_LL_EXPIRE_ONLY) != -ENOSYS)
		return;
	iv->no_expire = true;
	fuse_lowlevel_notify_inval_entry(iv->se, it->parent, it->name, it->len);
}

static void *inval_main(void *arg)
{
	struct inval *iv = arg;

	pthread_mutex_lock(&iv->mu);
	for (;;) {
		struct item *it;

		while (!iv->head && !iv->stop)
			pthread_cond_wait(&iv->cond, &iv->mu);
		if (!iv->head)
			break;
		it = iv->head;
		iv->head = it->next;
		if (!iv->head)
			iv->tail = &iv->head;
		pthread_mutex_unlock(&iv->mu);
		/* -ENOENT: the kernel had nothing cached. */
		if (!it->parent)
			iv->ack(iv->arg, it->seq);
		else if (it->len)
			inval_name(iv, it);
		else
			fuse_lowlevel_notify_inval_inode(iv->se, it->parent, 0,
							 0);
		free(it);
		pthread_mutex_lock(&iv->mu);
	}
	pthread_mutex_unlock(&iv->mu);
	return NULL;
}

int inval_start(struct fuse_session *se, void (*ack)(void *arg, uint64_t seq),
		void *arg, struct inval **out)
{
	struct inval *iv = calloc(1, sizeof(*iv));
	int rc;

	if (!iv)
		return -ENOMEM;
	iv->se = se;
	iv->ack = ack;
	iv->arg = arg;
	iv->tail = &iv->head;
	pthread_mutex_init(&iv->mu, NULL);
	pthread_cond_init(&iv->cond, NULL);
	rc = pthread_create(&iv->thread, NULL, inval_main, iv);
	if (rc) {
		free(iv);
		return -rc;
	}
	*out = iv;
	return 0;
}

void inval_stop(struct inval *iv)
{
	pthread_mutex_lock(&iv->mu);
	iv->stop = true;
	while (iv->head) {
		struct item *it = iv->head;

		iv->head = it->next;
		free(it);
	}
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->mu);
	pthread_join(iv->thread, NULL);
	pthread_mutex_destroy(&iv->mu);
	pthread_cond_destroy(&iv->cond);
	free(iv);
}

static void push(struct inval *iv, struct item *it)
{
	it->next = NULL;
	pthread_mutex_lock(&iv->mu);
	if (iv->stop) {
		pthread_mutex_unlock(&iv->mu);
		free(it);
		return;
	}
	*iv->tail = it;
	iv->tail = &it->next;
	pthread_cond_signal(&iv->cond);
	pthread_mutex_unlock(&iv->mu);
}

void inval_queue(struct inval *iv, fuse_ino_t parent, const char *name,
		 size_t len)
{
	struct item *it;

	if (!iv)
		return;
	it = malloc(sizeof(*it) + (name ? len + 1 : 1));
	if (!it)
		return;
	it->parent = parent;
	it->seq = 0;
	it->len = name ? len : 0;
	if (name)
		memcpy(it->name, name, len);
	it->name[it->len] = '\0';
	push(iv, it);
}

void inval_queue_ack(struct inval *iv, uint64_t seq)
{
	struct item *it;

	if (!iv || !iv->ack)
		return;
	it = malloc(sizeof(*it) + 1);
	if (!it)
		return;
	it->parent = 0;
	it->seq = seq;
	it->len = 0;
	it->name[0] = '\0';
	push(iv, it);
}

/* FUSE's notification code (linux/fuse.h, protocol 7.44). */
#define NOTIFY_INC_EPOCH 8

int inval_all_names(struct fuse_session *se)
{
	/* linux/fuse.h's fuse_out_header; unique 0 makes it a notice. */
	struct {
		uint32_t len;
		int32_t code;
		uint64_t unique;
	} h = { sizeof(h), NOTIFY_INC_EPOCH, 0 };

	return write(fuse_session_fd(se), &h, sizeof(h)) == (ssize_t)sizeof(h) ?
		       0 :
		       -errno;
}
