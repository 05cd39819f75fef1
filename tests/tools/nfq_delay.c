/* SPDX-License-Identifier: MIT */
/* nfq_delay: holds every packet of an NFQUEUE for a fixed time, then lets
 * it go. The fault tests use it for "delay 20 ms" because this kernel has no
 * tc netem:
 *
 *     iptables -A OUTPUT -p tcp -j NFQUEUE --queue-num 7 --queue-bypass
 *     nfq_delay 7 20 60        # queue 7, 20 ms, exit after 60 s at most
 *
 * It runs in the network namespace of the rule (NFQUEUE sockets are per
 * namespace). Every packet gets the same delay, so verdicts leave in arrival
 * order and TCP sees no reordering. Only packet metadata is copied to user
 * space (NFQNL_COPY_META). It prints "nfq_delay: ready" on stderr once bound
 * (the test waits for that line), ends on its own after MAX_SECONDS (so a
 * crashed test cannot leave a stalled namespace behind), and releases every
 * packet still held when it ends. With --queue-bypass on the rule, packets
 * pass undelayed once it has gone. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELD_MAX 65536 /* ring of packets waiting for their time */

struct held {
	uint32_t id;
	int64_t due_us;
};

static struct held ring[HELD_MAX];
static unsigned head, count;
static int64_t delay_us;
static uint64_t delayed, dropped_full;
static volatile sig_atomic_t stop;

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
		     void *data)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);

	if (!ph)
		return 0;
	uint32_t id = ntohl(ph->packet_id);
	if (count == HELD_MAX) {
		/* A full ring behaves like a full router queue: the packet is lost. */
		dropped_full++;
		return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
	}
	ring[(head + count) % HELD_MAX] = (struct held){ id, now_us() + delay_us };
	count++;
	return 0;
}

/* Accepts every held packet whose time has come (all of them when force). */
static void release(struct nfq_q_handle *qh, int force)
{
	int64_t t = now_us();

	while (count && (force || ring[head].due_us <= t)) {
		nfq_set_verdict(qh, ring[head].id, NF_ACCEPT, 0, NULL);
		head = (head + 1) % HELD_MAX;
		count--;
		delayed++;
	}
}

static void on_signal(int sig)
{
	stop = 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: nfq_delay QUEUE_NUM DELAY_MS MAX_SECONDS\n");
		return 2;
	}
	unsigned qnum = (unsigned)atoi(argv[1]);
	delay_us = (int64_t)atoi(argv[2]) * 1000;
	int64_t end_us = now_us() + (int64_t)atoi(argv[3]) * 1000000;

	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	struct nfq_handle *h = nfq_open();
	if (!h) {
		fprintf(stderr, "nfq_delay: nfq_open: %s\n", strerror(errno));
		return 1;
	}
	struct nfq_q_handle *qh = nfq_create_queue(h, qnum, on_packet, NULL);
	if (!qh) {
		fprintf(stderr, "nfq_delay: cannot bind queue %u: %s\n", qnum, strerror(errno));
		nfq_close(h);
		return 1;
	}
	if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 || nfq_set_queue_maxlen(qh, HELD_MAX) < 0) {
		fprintf(stderr, "nfq_delay: configuring queue %u: %s\n", qnum, strerror(errno));
		nfq_destroy_queue(qh);
		nfq_close(h);
		return 1;
	}
	int fd = nfq_fd(h);
	int rcvbuf = 8 << 20; /* a burst of a whole TCP window must not overflow the socket */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
	fprintf(stderr, "nfq_delay: ready (queue %u, %lld ms)\n", qnum, (long long)(delay_us / 1000));

	char buf[4096] __attribute__((aligned));
	uint64_t enobufs = 0;
	while (!stop && now_us() < end_us) {
		int timeout = 100;
		if (count) {
			int64_t wait = ring[head].due_us - now_us();
			timeout = wait <= 0 ? 0 : (int)((wait + 999) / 1000);
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, timeout) > 0) {
			for (;;) {
				ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
				if (n > 0) {
					nfq_handle_packet(h, buf, (int)n);
					continue;
				}
				if (n < 0 && errno == ENOBUFS) {
					enobufs++; /* the kernel dropped some: like loss */
					continue;
				}
				break;
			}
		}
		release(qh, 0);
	}
	release(qh, 1);
	fprintf(stderr, "nfq_delay: done: %llu packets delayed, %llu dropped (ring full), %llu ENOBUFS\n",
		(unsigned long long)delayed, (unsigned long long)dropped_full,
		(unsigned long long)enobufs);
	nfq_destroy_queue(qh);
	nfq_close(h);
	return 0;
}
