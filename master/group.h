/*
 * A group of masters (1, 3 or 5) with one leader, on etcd.
 *
 * etcd (Debian's etcd-server, one member beside each master) is the
 * group's consensus: it elects the leader and it holds the replicated
 * changelog. Nothing here votes or orders anything itself.
 *
 * Keys, under group_prefix ("/sweepfs/"):
 *   leader            "ID HOST:PORT" of the leader, attached to its lease:
 *                     the key goes when the leader stops renewing it.
 *   log/<version>     whole changelog records (changelog.h's format), the
 *                     first of them with this version (20 digits, so that
 *                     keys sort as versions do); contiguous from key to
 *                     key.
 *   members           the membership, "ID=HOST:PORT,...": the first member
 *                     to start puts its configuration's; admins change it
 *                     (sweepfs group add/remove).
 *   members/<ID>      each member's "ROLE VERSION WALL_NS", for status.
 *   transfer          "ID": the leader handed over to ID; on a short lease
 *                     of its own, and only ID campaigns while it is there.
 *
 * The leader is whoever created the leader key. Every record it ships goes
 * in a transaction that also compares the leader key's create_revision
 * with its own: once its lease expired (it stopped, or was cut off from
 * etcd's majority) no write of it can land, so it cannot acknowledge
 * anything after it lost the leadership. Its changelog is gated
 * (changelog_gate()): a change is written to its own disk and answered
 * only once etcd has committed it, so every member's disk holds a prefix
 * of the group's log.
 *
 * Followers apply each record as it lands (hot: a failover replays
 * nothing large) and serve nobody: a hello gets EREMOTE and the leader's
 * address. A follower that finds no leader key campaigns; the one whose
 * transaction creates the key reads the rest of the log, applies it, and
 * only then serves. A deposed leader exits (status 75, EX_TEMPFAIL): its
 * memory may hold changes the group never committed, and the restart
 * reloads what its disk and the group agree on.
 *
 * Threads: one thread of its own talks to etcd with blocking HTTP
 * (libcurl, etcd's JSON gateway); the loop and it share the fields marked
 * "under mu" in group.c, and it wakes the loop through a uv_async_t.
 */
#ifndef SWEEPFS_MASTER_GROUP_H
#define SWEEPFS_MASTER_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "req.h" /* GROUP_MAX, struct group_status */

struct master;

struct group_member {
	unsigned id;
	char addr[272]; /* HOST:PORT, clients' address */
};

/*
 * Parse "1=HOST:PORT,2=HOST:PORT,..." into @out (at most GROUP_MAX
 * members, ids 1..255, each once). 0 with *@n, or -EINVAL.
 */
int group_members_parse(const char *s, struct group_member *out, size_t *n);

/*
 * Join the group the configuration names (m->cfg.group_id != 0) as a
 * follower, after the metadata is loaded and the changelog open. 0 or
 * -errno (logged). Without a group: 0, and the master serves alone.
 */
int group_start(struct master *m);

/* changelog_opts.ship (@arg: the master): the leader's flushed records,
 * to etcd. */
void group_ship(void *arg, const uint8_t *recs, size_t len, uint64_t last);

/*
 * The changelog has records up to @version as durable as its policy
 * requires (on the loop, from changelog_opts.on_durable): the version
 * this member says it has applied, which etcd's log may be pruned to.
 * Never before: a member that said so of records still in memory would
 * lose them to a crash, and find them gone from the log.
 */
void group_durable(struct master *m, uint64_t version);

/* Stop the thread; at master_stop(). */
void group_stop(struct master *m);

/* Free what is left, after the loop has run the close callbacks. */
void group_release(struct master *m);

/*
 * Whether this master may answer a request now (@now: sw_mono_ns()):
 * false for a leader whose lease may have run out by its own clock (from
 * when it last asked etcd to renew it), until its thread renews the lease
 * (the requests held back then go on: server_resume()) or finds it lost
 * (the master exits, status 75). The loop asks before every request.
 */
bool group_may_answer(struct master *m, int64_t now);

/*
 * Whether requests held back while the lease was in doubt may still wait
 * in their buffers: true from the first group_may_answer() that said no
 * until the loop sees the lease renewed (which may be after etcd did),
 * and at the first call after that, since they are parsed again in an
 * idle callback (server_resume()), in that loop turn or the next.
 */
bool group_held_back(struct master *m);

/* Whether this master serves clients: alone, or the group's leader. */
bool group_serving(const struct master *m);

/*
 * Hand the leadership over (an admin's request to the leader): the thread
 * ships what is queued, leaves a transfer key naming @to (0: anyone) for
 * a few seconds, so that only @to campaigns, gives up its lease, and this
 * master exits as a deposed leader does. 0, -ENOTSUP alone, -EINVAL for
 * @to not another member of the group.
 */
int group_transfer(struct master *m, unsigned to);

struct req;

/*
 * Change the group's membership (an admin's request @r to the leader):
 * add member @add ("ID=HOST:PORT") or, with @add "", remove member
 * @remove. The group's thread makes the change in etcd and the loop
 * answers @r then: 0 (answer to come), -ENOTSUP alone, -EINVAL not the
 * leader, -EBUSY while another change is under way, -ENOMEM.
 */
int group_members_change(struct master *m, struct req *r, const char *add,
			 unsigned remove);

/*
 * A member catching up reads the leader's checkpoint @version (or waits
 * for one of that version at least): the log after it stays in etcd for
 * a minute more, whatever the members' versions say, so that the member
 * can follow from there once it has loaded it (catchup.h).
 */
void group_pin(struct master *m, uint64_t version);

/* The leader's client address, or "" (for a follower's EREMOTE). */
const char *group_leader(const struct master *m);

/* Fill @st; false when this master is not in a group. */
bool group_status(const struct master *m, struct group_status *st);

#endif
