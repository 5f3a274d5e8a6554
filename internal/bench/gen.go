package bench

// Regenerate with `make generate` (needs clang); the output is committed so
// `go build` works without it. Extra include paths come from $BPF2GO_CFLAGS,
// which go generate expands inside -cflags (the Makefile sets it).
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror $BPF2GO_CFLAGS" -type bench_counter -type gen_aim trafficgen ../../bpf/bench/trafficgen.c -- -I../../bpf/bench
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror $BPF2GO_CFLAGS" -type bench_counter -type sink_flow dut ../../bpf/bench/dut.c -- -I../../bpf/bench
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror $BPF2GO_CFLAGS" -type spread_state spread ../../bpf/bench/spread.c -- -I../../bpf/bench
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror $BPF2GO_CFLAGS" -type lat_ctl -type lat_aim -type lat_head latbench ../../bpf/bench/latency.c -- -I../../bpf/bench
