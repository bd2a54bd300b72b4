/*
 * cdel: the internals of `sweepfs compare-delete`, shared by its files
 * (the libfuse fuse_i.h arrangement):
 *
 *   cmd_compare_delete.c  options, set-up, the run (sizes x filesystems x
 *                         methods), clean-up, signals
 *   cdel_method.c         the deletion methods and measuring one of them
 *   cdel_fs.c             the filesystems: set-up, probe mounts, trees,
 *                         copies, clean-up
 *   cdel_master.c         requests to the master: counters, snapshots,
 *                         rmr, the snapshot flag, waiting for the purge
 *   cdel_proc.c           child processes: spawn, wait with a deadline
 *   cdel_report.c         the table, the ratios, the JSON file, the plot
 *
 * One struct cdel_run holds everything; it is built and freed by
 * cmd_compare_delete.c, and only the main thread changes it (the progress
 * and probe threads read what they were handed).
 */
#ifndef SWEEPFS_TOOLS_CDEL_H
#define SWEEPFS_TOOLS_CDEL_H

#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "statprobe.h"
#include "tool.h"
#include "treegen.h"

#define CDEL_MAX_FS 8
#define CDEL_MAX_SIZES 16
/* Our temporary directory's path, at most: room for names below it. */
#define CDEL_TMP_MAX 1024
/* System call names one result keeps (strace -c lists ~30 for rm). */
#define CDEL_MAX_SYSCALLS 64

enum cdel_method_id {
	CDEL_RM_RF,
	CDEL_REMOVEALL,
	CDEL_GO_REMOVEALL,
	CDEL_SWEEPFS_RM,
	CDEL_RMR,
	CDEL_SNAPSHOT,
	CDEL_NMETHODS
};

struct cdel_method {
	const char *name;  /* as in --methods and the table */
	const char *what;  /* one line for --help */
	bool sweepfs_only; /* needs the master: not applicable elsewhere */
	bool external;	   /* a program we spawn: syscalls from strace */
};

extern const struct cdel_method cdel_methods[CDEL_NMETHODS];

/* The method called @name, or -1. */
int cdel_method_find(const char *name);

/* Traffic of a master session (or of all): the Counters message. */
struct cdel_wire {
	uint64_t requests[SW_MSG__COUNT]; /* by message type */
	uint64_t errors;
	uint64_t bytes_in;  /* master's view: received */
	uint64_t bytes_out; /* sent */
	uint64_t readdir_entries;
	uint64_t batch_ops; /* removals sent in batches (delegations) */
};

/* The master at one moment. */
struct cdel_counters {
	uint64_t cpu_ms; /* user + system */
	uint64_t nodes;
	uint64_t purge_roots;
	struct cdel_wire total;
	struct cdel_wire session; /* of the session asked for */
	bool has_session;	  /* it was found */
};

/* System calls by name, from strace -c or counted in-process. */
struct cdel_syscalls {
	bool valid;
	const char *source; /* "strace" or "counted" */
	int n;
	struct {
		char name[24];
		uint64_t calls;
		uint64_t errors;
	} v[CDEL_MAX_SYSCALLS];
	uint64_t total;
};

enum cdel_status {
	CDEL_OK,
	CDEL_NA, /* not applicable or not available here: no failure */
	CDEL_FAILED,
};

/* One method on one filesystem for one size. */
struct cdel_result {
	uint64_t size; /* N asked for */
	int fs;	       /* index in run->fs */
	enum cdel_method_id method;
	enum cdel_status status;
	char note[512]; /* why NA or FAILED; warnings otherwise */
	uint64_t files; /* in the tree */
	uint64_t dirs;
	double wall_s;	/* until the deleter returned */
	double flag_s;	/* snapshot: the seteattr -r part of wall_s */
	double purge_s; /* rmr, snapshot: until purged; < 0: n/a */
	double cpu_s;	/* master CPU, user + system; < 0: n/a */
	bool has_wire;
	const char *wire_source; /* "session" or "total" (with the probe's) */
	struct cdel_wire wire;	 /* the deleting client's session, delta */
	struct cdel_wire total;	 /* all sessions, delta */
	struct cdel_syscalls sys;
	double strace_wall_s; /* of the separate counting run; < 0: none */
	bool has_probe;
	struct statprobe_result probe;
	int exit_status;       /* spawned programs: their status, or -1 */
	uint64_t passes;       /* removeall: directory passes (opens) */
	uint64_t names_listed; /* removeall: names getdents64 returned */
	uint64_t nodes;	       /* rmr, snapshot: nodes the master detached */
};

/* A filesystem under test. */
struct cdel_fs {
	const char *arg;	  /* as given */
	char root[PATH_MAX - 64]; /* realpath(arg): room for work's name */
	char work[PATH_MAX]; /* our directory in it, root/compare-delete.* */
	char label[40];	     /* "sweepfs", "ext4", ... (unique) */
	char fstype[64];     /* from mountinfo */
	char mnt[PATH_MAX];  /* its mount point */
	char mnt_source[PATH_MAX];
	char mnt_opts[1024];	  /* mount and super options */
	char mount_cmdline[4096]; /* sweepfs: the client's command line */
	bool sweepfs;
	/* sweepfs only: */
	struct sw_target target;
	char work_rel[PATH_MAX]; /* work below the export's root */
	struct sw_client *ctl;	 /* main thread: info, snapshots, purges */
	struct sw_client *mon;	 /* the progress thread's own */
	uint64_t mount_session;	 /* the mount's session id, 0: not found */
	char session_name[PATH_MAX + 300];
	char probe_mnt[PATH_MAX]; /* second mount point ("" none) */
	pid_t probe_pid;	  /* our sweepfs-mount there, or 0 */
	char probe_opts[256];
	Sweepfs__InfoReply *info0; /* the master at the start */
	uint32_t trashtime0;	   /* of work's parent, before */
	/* both: */
	char probe_dir[PATH_MAX]; /* work, as the probe sees it */
	bool probe_ok;
	char probe_note[256];
};

enum cdel_strace {
	CDEL_STRACE_SEPARATE, /* time a run, count another under strace */
	CDEL_STRACE_SAME,     /* time the run under strace */
	CDEL_STRACE_OFF,
};

struct cdel_run {
	/* Options. */
	enum treegen_shape shape;
	uint64_t sizes[CDEL_MAX_SIZES];
	int nsizes;
	bool sweep; /* --sizes given */
	bool methods[CDEL_NMETHODS];
	unsigned jobs; /* sweepfs-rm workers */
	enum cdel_strace strace_mode;
	unsigned probe_pause_us;
	const char *probe_mount; /* --probe-mount */
	double timeout_s;	 /* per method */
	bool drop_caches;
	char json_path[PATH_MAX];
	char plot_path[PATH_MAX];
	const char *go_src;	/* --go-src */
	const char *go_bin_opt; /* --go-bin */
	int argc;
	char **argv;

	struct cdel_fs fs[CDEL_MAX_FS];
	int nfs;

	/* Found at set-up. */
	char tmp[CDEL_TMP_MAX]; /* our temporary directory */
	char rm[PATH_MAX];	/* rm, or "" */
	char rm_version[128];
	char strace[PATH_MAX]; /* strace, or "" */
	char strace_version[128];
	char go_bin[PATH_MAX]; /* the go-removeall program, or "" */
	char go_version[128];
	char go_note[256];	  /* why there is no go_bin */
	char mount_bin[PATH_MAX]; /* sweepfs-mount, or "" */
	bool caches_dropped;	  /* we could and did */
	int64_t started;	  /* wall clock, ns */
	char loadavg[64];	  /* /proc/loadavg at the start */

	/* Results, in run order. */
	struct cdel_result *res;
	size_t nres;
	size_t cap;
};

/* ---- stopping: SIGINT/SIGTERM, and per-method deadlines ---------------- */

/* The signal that asked us to stop, or 0. */
extern atomic_int cdel_stop;

/*
 * Whether the work in progress should give up: a stop was asked, or the
 * deadline set with cdel_deadline_set() has passed. Async-safe enough to
 * be called from system call hooks on any thread.
 */
bool cdel_cancelled(void);

/* Deadline for cdel_cancelled(), CLOCK_MONOTONIC ns; 0: none. */
void cdel_deadline_set(int64_t mono_ns);

/* ---- cdel_proc.c: children -------------------------------------------- */

/*
 * Start @argv[0] (a path) with @argv, in @cwd (NULL: ours), stdout and
 * stderr to @out (NULL: /dev/null), stdin from /dev/null, signals reset,
 * in a process group of its own: a ^C on the terminal reaches us, and we
 * stop the whole group (strace and its tracee together). Extra
 * environment @env (NULL-terminated "K=V" list, may be NULL) is added to
 * ours. Returns 0 with *@pid or -errno.
 */
int cdel_spawn(char *const argv[], const char *cwd, const char *out,
	       char *const env[], pid_t *pid);

/*
 * Wait for child @pid until @deadline (CLOCK_MONOTONIC ns; 0: no limit),
 * giving up early if cdel_stop is set: then its process group is sent
 * SIGTERM, SIGKILL after 5 s, and it is reaped. Returns the exit status
 * (0..255), 128 + signal if a signal ended it, -ETIMEDOUT or -EINTR
 * (stopped) after having killed it, or -errno.
 */
int cdel_wait(pid_t pid, int64_t deadline);

/* cdel_spawn() + cdel_wait() without deadline. */
int cdel_run_prog(char *const argv[], const char *cwd, const char *out,
		  char *const env[]);

/* The first line @argv prints (its --version), into @buf; "" if none. */
void cdel_prog_line(char *const argv[], const char *tmp, char *buf, size_t len);

/* @name as found on $PATH (or @name itself if it has a '/') into @out, if
 * executable. */
bool cdel_which(const char *name, char *out, size_t len);

/* ---- cdel_master.c ------------------------------------------------------ */

/* INFO, with the sessions' counters when @sessions. Prints nothing.
 * Returns 0 with *@out (free with protobuf_c_message_free_unpacked). */
int cdel_info(struct sw_client *c, bool sessions, Sweepfs__InfoReply **out);

/* The master's counters, with session @session's (0: none) in
 * out->session. */
int cdel_counters(struct sw_client *c, uint64_t session,
		  struct cdel_counters *out);

/* @d = @b - @a, per field. */
void cdel_wire_delta(const struct cdel_wire *a, const struct cdel_wire *b,
		     struct cdel_wire *d);

/* The id of the connected mount session called @name, or 0. */
uint64_t cdel_find_session(struct sw_client *c, const char *name);

/*
 * Wait until the purge with id @purge_id is done (0: until the purge
 * queue is empty), polling every 20 ms, for at most @timeout_s. Returns 0,
 * -ETIMEDOUT, -EINTR (stopped) or -errno.
 */
int cdel_wait_purge(struct sw_client *c, uint64_t purge_id, double timeout_s);

/*
 * Atomic copy of @src_rel as @name in directory @dir_rel (paths below
 * the export's root). The master answers when the copy is named, after
 * its background slices (snapjob.c): the answer is waited for up to
 * @timeout_s, not the connection's per-call limit.
 */
int cdel_snapshot(struct sw_client *c, const char *src_rel, const char *dir_rel,
		  const char *name, double timeout_s);

/* RMR @name in directory inode @parent, skipping the trash. */
int cdel_rmr(struct sw_client *c, uint64_t parent, const char *name,
	     uint64_t *purge_id, uint64_t *nodes);

/* rmr of @rel and wait for its purge (clean-up, not measured). */
int cdel_rmr_path(struct sw_client *c, const char *rel, double timeout_s);

/* seteattr -f snapshot -r @name in @parent. */
int cdel_set_snapshot_flag(struct sw_client *c, uint64_t parent,
			   const char *name, uint64_t *changed);

/* rmsnapshot @name in @parent. */
int cdel_rmsnapshot(struct sw_client *c, uint64_t parent, const char *name,
		    uint64_t *purge_id, uint64_t *nodes);

/* Trash time of directory @rel: read into *@get, and set to 0 if
 * @zero. */
int cdel_trashtime(struct sw_client *c, const char *rel, uint32_t *get,
		   bool zero);

/* ---- cdel_fs.c: the filesystems under test ----------------------------- */

/*
 * Set @fs up from fs->arg: find its mount, make our work directory in it
 * and the file the stat probe looks at; on sweepfs also connect to the
 * master, find the mount's session, zero the work directory's trash time
 * and mount (or check, with --probe-mount) a second client for the
 * probe. @sweepfs_required: refuse another filesystem. Prints why on
 * failure. Returns 0 or -errno; cdel_fs_cleanup() undoes it either way.
 */
int cdel_fs_setup(struct cdel_run *r, struct cdel_fs *fs,
		  bool sweepfs_required);

/* Remove the work directory, unmount the probe's mount, disconnect. */
void cdel_fs_cleanup(struct cdel_run *r, struct cdel_fs *fs);

/* Make the tree of the run's shape with @n files at @path (below
 * fs->work), with a progress bar titled @label. */
int cdel_fs_build(struct cdel_run *r, struct cdel_fs *fs, const char *path,
		  uint64_t n, const char *label);

/* An identical copy of the template @tmpl at @dst: a snapshot on sweepfs,
 * built again elsewhere. */
int cdel_fs_copy(struct cdel_run *r, struct cdel_fs *fs, const char *tmpl,
		 const char *dst, uint64_t n);

/* Remove @path (below fs->work) if it exists, unmeasured, purge included. */
int cdel_fs_remove(struct cdel_run *r, struct cdel_fs *fs, const char *path);

/* Before a deletion: the master's purge queue empty, caches dropped. */
void cdel_fs_settle(struct cdel_run *r, struct cdel_fs *fs);

/* ---- cdel_method.c ------------------------------------------------------ */

enum cdel_pass {
	CDEL_PASS_TIMED,  /* the measured deletion */
	CDEL_PASS_STRACE, /* only to count system calls under strace */
};

/*
 * Delete @tree (an absolute path, an identical copy of the size's
 * template, caches dropped) on @fs with @res->method and measure it into
 * @res (which the caller initialised with size, fs, method, files and
 * dirs). Failures are recorded in @res (status, note); returns 0 if the
 * tree is gone afterwards, else -errno (the caller removes what is left).
 */
int cdel_measure(struct cdel_run *r, struct cdel_fs *fs, const char *tree,
		 enum cdel_pass pass, struct cdel_result *res);

/* ---- cdel_report.c ------------------------------------------------------ */

/* The table of the results for @size, and its ratios, on stdout. */
void cdel_report_table(const struct cdel_run *r, uint64_t size);

/* Write the JSON file (all results so far). Returns 0 or -errno. */
int cdel_report_json(const struct cdel_run *r);

/* Write the gnuplot script next to @r->plot_path and run gnuplot. Prints
 * what it did. Returns 0 or -errno. */
int cdel_report_plot(const struct cdel_run *r);

/* result ratio helpers, shared by the table and the JSON. */
const struct cdel_result *cdel_find_result(const struct cdel_run *r,
					   uint64_t size, int fs,
					   enum cdel_method_id m);

/* Wire bytes of @res (in + out of the deleting session). */
uint64_t cdel_wire_bytes(const struct cdel_result *res);

/* Files per second: by wall time, or by the time until purged. */
double cdel_files_per_s(const struct cdel_result *res, bool purged);

#endif
