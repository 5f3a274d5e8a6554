/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Programs of `xdpfw bench latency` (docs/realtime.md, "End to end"):
 *
 *   latgen    the paced generator, run with BPF_PROG_RUN in live-frames
 *             mode with a batch size of 1 (every frame is flushed to the
 *             veth as soon as it is sent): packet number seq waits, by
 *             spinning on the clock, until start + seq * interval, takes
 *             flow seq % n (source address, source and destination port
 *             from lat_aims), writes its sequence number and the clock
 *             into the payload and is redirected to gen_ifindex;
 *   latsink   on the sink's veth: one-way latency = the clock now - the
 *             payload's timestamp (one kernel, one clock: no sync), kept
 *             per sequence number in lat_samples; answers the frame
 *             (XDP_TX, addresses and ports swapped) while lat_ctl.answer
 *             is set (the warm-up: a connection answered takes xdpfw's
 *             fast path), else drops it;
 *   latreply  on the generator's veth: counts the answers, drops them.
 *
 * At high loads Go asks for bursts: the kernel flushes every burst frames
 * (the run's batch size), and only a burst's first frame waits for its
 * time; a flush per frame costs the generator a few microseconds.
 *
 * Payload (after the UDP header): struct lat_payload. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "bench.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define LAT_MAGIC 0x7844504cu /* "xDPL" */

/* Interface the generator redirects to: its veth (set before load). */
volatile const __u32 gen_ifindex = 0;

/* What the generator writes after the UDP header. */
struct lat_payload {
	__u32 magic;
	__u32 seq; /* the packet's number in its run, from 0 */
	__u64 ts;  /* bpf_ktime_get_ns() when it was sent */
};

/* One flow: source address, ports (network order). */
struct lat_aim {
	__u32 saddr;
	__u16 sport;
	__u16 dport;
};

/* The generator's and the sink's settings and counts, written by Go
 * between runs. */
struct lat_ctl {
	__u64 interval; /* ns between two packets' send times (0: flat out) */
	__u64 start;    /* send time of packet 0 (0: the first run sets it) */
	__u64 seq;      /* packets sent in this run */
	__u32 aims;     /* flows in use (lat_aims), at least 1 */
	__u32 answer;   /* 1: the sink answers (warm-up), 0: it drops */
	__u32 burst;    /* packets per flush (the run's batch size): only the first of each waits */
	__u32 pad;
	__u64 late;     /* packets sent more than an interval late: the schedule moved */
	__u64 received; /* packets the sink took (ours, with a sample slot) */
	__u64 answers;  /* answers latreply counted */
	__u64 foreign;  /* frames the sink or latreply saw that are not ours */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_ctl);
} lat_ctl_map SEC(".maps");

/* The template frame's first LAT_HEAD bytes (Ethernet, IPv4, UDP and the
 * payload's start), written back over every frame: live frames come from
 * a page pool whose pages keep what the last user wrote, and the DUT
 * rewrites MACs and the TTL, the sink swaps addresses. */
#define LAT_HEAD 48
struct lat_head {
	__u64 w[LAT_HEAD / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_head);
} lat_tmpl SEC(".maps");

/* Sized by the loader (max_entries: the flows). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lat_aim);
} lat_aims SEC(".maps");

/* One-way latency of packet seq in ns, plus 1 (0: not received; the
 * largest value: 4.3 s or more). Sized by the loader: the most packets a
 * run sends. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lat_samples SEC(".maps");

static __always_inline struct lat_ctl *ctl(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&lat_ctl_map, &zero);
}

/* bpf_loop callback: stop once the clock reaches *until. */
static long spin(__u64 i, void *until)
{
	return bpf_ktime_get_ns() >= *(__u64 *)until;
}

SEC("xdp")
int latgen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct lat_payload *pl = (void *)(udp + 1);
	struct lat_ctl *c = ctl();
	struct lat_head *h;
	struct lat_aim *a;
	__u64 seq, now, due, *w = data;
	__u32 i = 0;

	if ((void *)(pl + 1) > data_end || (void *)(w + LAT_HEAD / 8) > data_end || !c)
		return XDP_ABORTED;
	h = bpf_map_lookup_elem(&lat_tmpl, &i);
	if (!h)
		return XDP_ABORTED;
#pragma unroll
	for (int k = 0; k < LAT_HEAD / 8; k++)
		w[k] = h->w[k];
	seq = c->seq++;
	i = (__u32)(seq % (c->aims ? c->aims : 1));
	a = bpf_map_lookup_elem(&lat_aims, &i);
	if (!a)
		return XDP_ABORTED;
	ip->saddr = a->saddr;
	udp->source = a->sport;
	udp->dest = a->dport;
	ip->check = ipv4_csum(ip);

	/* Pacing: wait for this packet's time. bpf_loop bounds the spin
	 * (8M rounds of a clock read: some 200 ms), longer gaps send early.
	 * A packet more than an interval (a burst's) late (this thread was preempted)
	 * goes now and moves the schedule: a gap, never a burst catching up
	 * (a burst would queue at the DUT and measure the generator). */
	now = bpf_ktime_get_ns();
	if (!c->start)
		c->start = now;
	due = c->start + seq * c->interval;
	if (c->burst > 1 && seq % c->burst) {
		/* within a burst: at once (the kernel flushes every burst
		 * frames, the batch size Go asked for) */
	} else if (now < due) {
		bpf_loop(1 << 23, spin, &due, 0);
	} else if (now - due > c->interval * (c->burst ? c->burst : 1)) {
		c->start += now - due;
		c->late++;
	}
	pl->magic = bpf_htonl(LAT_MAGIC);
	pl->seq = (__u32)seq;
	pl->ts = bpf_ktime_get_ns();
	return bpf_redirect(gen_ifindex, 0);
}

/* ours parses an IPv4/UDP frame of the generator (or its answer): its
 * payload, or NULL. */
static __always_inline struct lat_payload *ours(void *data, void *data_end, struct iphdr **ipp, struct udphdr **udpp)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct lat_payload *pl = (void *)(udp + 1);

	if ((void *)(pl + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
	    ip->protocol != IPPROTO_UDP || pl->magic != bpf_htonl(LAT_MAGIC))
		return NULL;
	*ipp = ip;
	*udpp = udp;
	return pl;
}

SEC("xdp")
int latsink(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct lat_ctl *c = ctl();
	struct lat_payload *pl;
	struct udphdr *udp;
	struct iphdr *ip;
	__u32 seq, *slot;

	if (!c)
		return XDP_ABORTED;
	pl = ours(data, data_end, &ip, &udp);
	if (!pl) {
		__sync_fetch_and_add(&c->foreign, 1);
		return XDP_DROP;
	}
	seq = pl->seq;
	slot = bpf_map_lookup_elem(&lat_samples, &seq);
	if (slot) {
		__u64 d = now - pl->ts + 1;

		*slot = d > 0xffffffffull ? 0xffffffffu : (__u32)d;
		__sync_fetch_and_add(&c->received, 1);
	}
	if (!c->answer)
		return XDP_DROP;

	/* The answer: addresses and ports swapped (the checksums stay). */
	struct ethhdr *eth = data;
	__u8 mac[ETH_ALEN];
	__u32 a = ip->saddr;
	__u16 p = udp->source;

	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
	ip->saddr = ip->daddr;
	ip->daddr = a;
	udp->source = udp->dest;
	udp->dest = p;
	return XDP_TX;
}

SEC("xdp")
int latreply(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct lat_ctl *c = ctl();
	struct udphdr *udp;
	struct iphdr *ip;

	if (!c)
		return XDP_ABORTED;
	if (ours(data, data_end, &ip, &udp))
		__sync_fetch_and_add(&c->answers, 1);
	else
		__sync_fetch_and_add(&c->foreign, 1);
	return XDP_DROP;
}
