package datapath

// Regenerate with `make generate` (needs clang); the output is committed so
// `go build` works without it. Extra include paths come from BPF2GO_CFLAGS.
//go:generate go tool bpf2go -tags linux -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror" -type fw_entry -type fw_counter -type fw_config -type fw_node -type fw_root -type fw_delta -type fw_set_key -type fw_ct_key -type fw_ct_entry -type fw_clock -type fw_log_event -type fw_log_limit -type fw_log_stat xdpfw ../../bpf/xdpfw.c -- -I../../bpf
