/*
 * The nodes one request names and their handles (hset.h). A request's
 * are found by sw_msg_vouch() on a copy of it, so that the caller's
 * message, which may be const, a loop's, or sent again, stays as it was.
 *
 * For a batch's directories, a linear scan
 * finds duplicates: 64 entries at most, and the nodes a request names in
 * a row are most often the same (a batch's operations in one directory),
 * so the scan starts with the last one added.
 */
#include <stdlib.h>
#include <string.h>

#include "hset.h"

bool hset_add(struct hset *s, uint64_t ino, uint64_t handle)
{
	for (size_t i = s->n; i > 0; i--) {
		if (s->ino[i - 1] == ino) {
			if (!s->handle[i - 1])
				s->handle[i - 1] = handle;
			return true;
		}
	}
	if (s->n == SW_HANDLES_MAX)
		return false;
	s->ino[s->n] = ino;
	s->handle[s->n++] = handle;
	return true;
}

size_t hset_pack(struct hset *s, uint64_t (*more)(void *arg, uint64_t ino),
		 void *arg)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n; i++) {
		uint64_t h = s->handle[i];

		if (!h && more)
			h = more(arg, s->ino[i]);
		if (h)
			s->handle[k++] = h;
	}
	return k;
}

const ProtobufCMessage *hset_attach(struct hset_msg *w, uint16_t type,
				    const ProtobufCMessage *req, hset_fn fn,
				    void *arg)
{
	size_t size = req->descriptor->sizeof_message;
	ProtobufCMessage *copy = &w->copy.msg;

	w->heap = NULL;
	if (!fn)
		return req;
	if (size > sizeof(w->copy)) {
		copy = w->heap = malloc(size);
		if (!copy)
			return req;
	}
	memcpy(copy, req, size);
	if (!sw_msg_vouch(type, copy, fn, arg, w->h)) {
		hset_detach(w);
		return req;
	}
	return copy;
}

void hset_detach(struct hset_msg *w)
{
	free(w->heap);
	w->heap = NULL;
}
