/*
 * uvserver.h: accepting up to max_conns (the next is closed at once),
 * the owner's ops called in their order, a reference keeping a closed
 * connection's memory until it is dropped, the flush list, the pre-hello
 * budget, a peer stuck mid-frame closed, the caps on connections without
 * a hello (per address, in all, in time), and the total cap on output
 * that closes the heaviest connection first.
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"
#include "uvserver.h"

struct tconn {
	struct sw_sconn sc;
	int flushed;
};

static int accepted, closing, released;
static struct sw_sconn *last;
static struct sw_sconn *all[16]; /* by order of acceptance */
static bool hold;		 /* keep a reference on each in all[] */

static int t_accepted(struct sw_sconn *c)
{
	if (accepted < 16) {
		all[accepted] = c;
		if (hold)
			sw_sconn_get(c); /* its fields stay readable */
	}
	accepted++;
	last = c;
	return 0;
}

static void t_flush(struct sw_sconn *c)
{
	((struct tconn *)c)->flushed++;
}

static void t_closing(struct sw_sconn *c)
{
	(void)c;
	closing++;
}

static void t_release(struct sw_sconn *c)
{
	(void)c;
	released++;
}

static const struct sw_server_ops ops = {
	.conn_size = sizeof(struct tconn),
	.accepted = t_accepted,
	.flush = t_flush,
	.closing = t_closing,
	.release = t_release,
};

/* Connect to @port from 127.0.0.@from (0: any). */
static int dial_from(uint16_t port, int from)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (from) {
		struct sockaddr_in src = { .sin_family = AF_INET };

		src.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)from);
		assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)),
				 0);
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static int dial(uint16_t port)
{
	return dial_from(port, 0);
}

/* Whether @fd sees end of stream within @ms. */
static bool eof_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, ms) == 1 && read(fd, &c, 1) <= 0;
}

/* Run @loop until *@counter reaches @want, for at most 5 s (the
 * assertions after say whether it did). */
static void spin_until(uv_loop_t *loop, const int *counter, int want)
{
	for (int i = 0; i < 5000 && *counter < want; i++) {
		uv_run(loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	uv_run(loop, UV_RUN_NOWAIT);
}

static void test_accept_cap_and_lifetime(void **state)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss), fd1, fd2, fd3;
	struct sw_server srv = { 0 };
	struct sw_sconn *first;
	uv_loop_t loop;
	uint16_t port;

	(void)state;
	accepted = closing = released = 0;
	uv_loop_init(&loop);
	srv.peer_timeout_ms = 12000;
	assert_int_equal(sw_server_listen(&srv, &loop, &ops, "test",
					  "127.0.0.1", 0, 2, NULL),
			 0);
	uv_tcp_getsockname(&srv.listener, (struct sockaddr *)&ss, &len);
	port = ntohs(((struct sockaddr_in *)&ss)->sin_port);

	fd1 = dial(port);
	spin_until(&loop, &accepted, 1);
	first = last;
	fd2 = dial(port);
	spin_until(&loop, &accepted, 2);
	fd3 = dial(port); /* over max_conns: closed, never accepted */
	spin_until(&loop, &released, 1);
	assert_int_equal(accepted, 2);
	assert_int_equal(srv.nconns, 2);
	assert_true(eof_within(fd3, 1000));
	assert_int_equal(closing, 0); /* not for one never accepted */
	assert_int_equal(released, 1);
	assert_true(strncmp(first->peer, "127.0.0.1:", 10) == 0);
	{
		/* Keepalives: a peer whose network died is noticed. */
		unsigned user = 0;
		int on = 0;
		socklen_t sl = sizeof(on);
		uv_os_fd_t fd;

		assert_int_equal(uv_fileno((uv_handle_t *)&first->tcp, &fd), 0);
		assert_int_equal(
			getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &sl), 0);
		assert_int_equal(on, 1);
		sl = sizeof(user);
		assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
					    &user, &sl),
				 0);
		assert_int_equal(user, 12000);
	}

	/* The flush list: once per add, in the check phase. */
	sw_sconn_flush_add(first);
	sw_sconn_flush_add(first);
	sw_server_flush(&srv);
	assert_int_equal(((struct tconn *)first)->flushed, 1);

	/* A holder keeps the memory past the close. */
	sw_sconn_get(first);
	sw_sconn_flush_add(first);
	sw_sconn_close(first);
	assert_null(srv.flush); /* taken off the flush list */
	spin_until(&loop, &closing, 1);
	assert_int_equal(closing, 1);
	assert_int_equal(released, 1);
	assert_true(eof_within(fd1, 1000));
	sw_sconn_put(first);
	assert_int_equal(released, 2);
	assert_int_equal(srv.nconns, 1);

	/* The pre-hello budget follows what is buffered, and frees it at
	 * the close. */
	sw_sconn_account(last, 100);
	assert_int_equal(srv.unauth_bytes, 100);
	assert_true(sw_server_unauth_over(&srv, 1, 100));
	assert_false(sw_server_unauth_over(&srv, 1, 101));
	sw_sconn_account(last, 40);
	assert_int_equal(srv.unauth_bytes, 40);

	/* Stalled mid-frame: closed once the limit passes. */
	sw_sconn_partial(last, true);
	assert_true(last->partial_since > 0);
	sw_server_reap_stalled(&srv, 60 * SW_NSEC_PER_SEC);
	assert_false(last->closing);
	last->partial_since -= 2 * SW_NSEC_PER_SEC;
	sw_server_reap_stalled(&srv, SW_NSEC_PER_SEC);
	assert_true(last->closing);
	assert_int_equal(srv.unauth_bytes, 0);
	spin_until(&loop, &released, 3);
	assert_true(eof_within(fd2, 1000));
	assert_int_equal(released, 3);
	assert_int_equal(srv.nconns, 0);

	sw_server_unlisten(&srv, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	close(fd1);
	close(fd2);
	close(fd3);
}

static uint16_t listen_any(struct sw_server *srv, uv_loop_t *loop,
			   uint64_t max_conns)
{
	struct sockaddr_storage ss;
	int len = sizeof(ss);

	assert_int_equal(sw_server_listen(srv, loop, &ops, "test", "127.0.0.1",
					  0, max_conns, NULL),
			 0);
	uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void test_prehello_caps(void **state)
{
	struct sw_server srv = { 0 };
	int fd[6];
	uv_loop_t loop;
	uint16_t port;

	(void)state;
	accepted = closing = released = 0;
	hold = true;
	uv_loop_init(&loop);
	srv.anon_per_addr = 2;
	srv.anon_max = 3;
	port = listen_any(&srv, &loop, 100);

	/* Two from .1, then a third: the oldest of .1 goes. */
	fd[0] = dial_from(port, 1);
	spin_until(&loop, &accepted, 1);
	fd[1] = dial_from(port, 1);
	spin_until(&loop, &accepted, 2);
	assert_int_equal(srv.nanon, 2);
	fd[2] = dial_from(port, 1);
	spin_until(&loop, &accepted, 3);
	assert_true(all[0]->closing);
	assert_false(all[1]->closing);
	assert_int_equal(srv.nanon, 2);
	assert_true(eof_within(fd[0], 1000));

	/* One from .2 fits in all (3); one from .3 makes the oldest of all,
	 * .1's second, go. */
	fd[3] = dial_from(port, 2);
	spin_until(&loop, &accepted, 4);
	assert_int_equal(srv.nanon, 3);
	fd[4] = dial_from(port, 3);
	spin_until(&loop, &accepted, 5);
	assert_true(all[1]->closing);
	assert_false(all[2]->closing);
	assert_false(all[3]->closing);
	assert_int_equal(srv.nanon, 3);
	assert_int_equal(srv.anon_evicted, 2);

	/* Said hello: out of the caps and the timeout. */
	sw_sconn_known(all[2]);
	assert_int_equal(srv.nanon, 2);
	fd[5] = dial_from(port, 1);
	spin_until(&loop, &accepted, 6);
	assert_false(all[2]->closing);
	assert_int_equal(srv.nanon, 3);

	/* Silent past the timeout: closed, the oldest first, the known one
	 * never. */
	sw_server_reap_silent(&srv, 60 * SW_NSEC_PER_SEC);
	assert_int_equal(srv.nanon, 3);
	all[3]->accepted_at -= 2 * SW_NSEC_PER_SEC;
	all[4]->accepted_at -= 2 * SW_NSEC_PER_SEC;
	sw_server_reap_silent(&srv, SW_NSEC_PER_SEC);
	assert_true(all[3]->closing);
	assert_true(all[4]->closing);
	assert_false(all[5]->closing);
	assert_false(all[2]->closing);
	assert_int_equal(srv.nanon, 1);
	sw_sconn_close(all[2]);
	sw_sconn_close(all[5]);
	assert_int_equal(srv.nanon, 0);
	assert_null(srv.anon_head);
	spin_until(&loop, &closing, 6);
	assert_int_equal(released, 0);
	for (int i = 0; i < 6; i++)
		sw_sconn_put(all[i]);
	hold = false;
	assert_int_equal(released, 6);
	assert_int_equal(srv.nconns, 0);

	sw_server_unlisten(&srv, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	for (int i = 0; i < 6; i++)
		close(fd[i]);
}

static void test_output_total(void **state)
{
	struct sw_server srv = { 0 };
	int fd[3];
	uv_loop_t loop;
	uint16_t port;

	(void)state;
	accepted = closing = released = 0;
	hold = true;
	uv_loop_init(&loop);
	srv.out_max = 100;
	port = listen_any(&srv, &loop, 100);
	for (int i = 0; i < 3; i++) {
		fd[i] = dial(port);
		spin_until(&loop, &accepted, i + 1);
	}
	sw_sconn_output(all[0], 30);
	sw_sconn_output(all[1], 60);
	sw_sconn_output(all[2], 10);
	assert_int_equal(srv.out_total, 100);
	assert_int_equal(srv.out_shed, 0);
	/* Past the cap by the light one: the heaviest goes, not it; marked
	 * and counted out at once, closed by sw_server_shed() (the check
	 * phase), never under a caller that may be walking a list. */
	sw_sconn_output(all[2], 20);
	assert_true(all[1]->shed);
	assert_false(all[1]->closing);
	assert_false(all[0]->shed);
	assert_false(all[2]->shed);
	assert_int_equal(srv.out_total, 50);
	assert_int_equal(srv.out_shed, 1);
	/* What it holds later does not count again. */
	sw_sconn_output(all[1], 90);
	assert_int_equal(srv.out_total, 50);
	sw_server_shed(&srv);
	assert_true(all[1]->closing);
	assert_false(all[0]->closing);
	assert_false(all[2]->closing);
	assert_null(srv.shed);
	/* Less held: counted down; a close counts it out. */
	sw_sconn_output(all[0], 5);
	assert_int_equal(srv.out_total, 25);
	sw_sconn_close(all[2]);
	assert_int_equal(srv.out_total, 5);
	sw_sconn_close(all[0]);
	assert_int_equal(srv.out_total, 0);
	spin_until(&loop, &closing, 3);
	for (int i = 0; i < 3; i++)
		sw_sconn_put(all[i]);
	hold = false;
	assert_int_equal(released, 3);

	sw_server_unlisten(&srv, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	for (int i = 0; i < 3; i++)
		close(fd[i]);
}

static void test_listen_failure(void **state)
{
	struct sw_server a = { 0 }, b = { 0 };
	struct sockaddr_storage ss;
	int len = sizeof(ss);
	uv_loop_t loop;

	(void)state;
	uv_loop_init(&loop);
	assert_int_equal(sw_server_listen(&a, &loop, &ops, "test", "127.0.0.1",
					  0, 8, NULL),
			 0);
	uv_tcp_getsockname(&a.listener, (struct sockaddr *)&ss, &len);
	/* The same port again: refused, the listener closed for us. */
	assert_true(
		sw_server_listen(&b, &loop, &ops, "test", "127.0.0.1",
				 ntohs(((struct sockaddr_in *)&ss)->sin_port),
				 8, NULL) < 0);
	sw_server_unlisten(&a, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_cap_and_lifetime),
		cmocka_unit_test(test_listen_failure),
		cmocka_unit_test(test_prehello_caps),
		cmocka_unit_test(test_output_total),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
