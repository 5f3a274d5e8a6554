package datapath

// Regenerate with `make generate` (needs clang); the output is committed so
// `go build` works without it. Extra include paths come from $BPF2GO_CFLAGS,
// which go generate expands inside -cflags (the Makefile sets it).
// -mcpu=v3 (Linux 5.1+): 32-bit ALU and jumps, so 32-bit values need no
// zero-extending shift pairs: ~22 fewer instructions per packet.
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 $BPF2GO_CFLAGS" -type fw_entry -type fw_cand -type fw_counter -type fw_config -type fw_node -type fw_root -type fw_delta -type fw_set_key -type fw_ct_key -type fw_ct_entry -type fw_frag_key -type fw_frag_entry -type fw_clock -type fw_log_event -type fw_bucket -type fw_log_stat -type fw_lat_hist -type fw_pppoe_key -type fw_pppoe_out -type fw_prio_cfg xdpfw ../../bpf/xdpfw.c -- -I../../bpf
