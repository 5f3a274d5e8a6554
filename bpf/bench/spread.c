/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Driver of `xdpfw bench micro --spread K`, run with BPF_PROG_TEST_RUN and
 * a repeat count: every run copies the next of spread_count template frames
 * (SPREAD_FRAME bytes each, aimed at different rules, in random order) over
 * the test packet and tail-calls the program under test (slot 0 of
 * spread_progs: xdpfw's XDP program, or spread_empty for the baseline).
 *
 * Per-packet time: each run reads the clock first and adds the time since
 * the previous run's start to a histogram of 1 ns buckets. That interval is
 * the program under test plus this driver and the test loop; the same
 * series with spread_empty measures the driver and the loop alone, with the
 * same frames. The first run of a call has no previous start (the caller
 * sets prev to 0 before each call). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define SPREAD_FRAME 96      /* bytes of each template frame */
#define SPREAD_BUCKETS 16384 /* 1 ns each; the last holds everything longer */

struct spread_frame {
	__u64 w[SPREAD_FRAME / 8];
};

struct spread_state {
	__u64 prev;  /* clock at the previous run's start; 0: none */
	__u32 next;  /* the next run's frame */
	__u32 count; /* frames in use (K), at least 1 */
};

struct spread_hist {
	__u32 n[SPREAD_BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct spread_state);
} spread_st SEC(".maps");

/* Sized by the loader (max_entries = the number of frames). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct spread_frame);
} spread_frames SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct spread_hist);
} spread_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} spread_progs SEC(".maps");

SEC("xdp")
int spread(struct xdp_md *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	struct spread_frame *f;
	struct spread_state *st;
	struct spread_hist *h;
	__u32 zero = 0, i;
	__u64 *d;

	st = bpf_map_lookup_elem(&spread_st, &zero);
	h = bpf_map_lookup_elem(&spread_hists, &zero);
	if (!st || !h)
		return XDP_ABORTED;
	if (st->prev) {
		__u64 dt = now - st->prev;

		if (dt >= SPREAD_BUCKETS)
			dt = SPREAD_BUCKETS - 1;
		h->n[dt & (SPREAD_BUCKETS - 1)]++;
	}
	st->prev = now;
	i = st->next;
	f = bpf_map_lookup_elem(&spread_frames, &i);
	if (!f)
		return XDP_ABORTED;
	st->next = i + 1 < st->count ? i + 1 : 0;
	d = (void *)(long)ctx->data;
	if ((void *)(d + SPREAD_FRAME / 8) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
#pragma unroll
	for (int w = 0; w < SPREAD_FRAME / 8; w++)
		d[w] = f->w[w];
	bpf_tail_call(ctx, &spread_progs, 0);
	return XDP_ABORTED;
}

/* The baseline's program under test: nothing. */
SEC("xdp")
int spread_empty(struct xdp_md *ctx)
{
	return XDP_DROP;
}
