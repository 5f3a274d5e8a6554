// Command xdpfw is the xdpfw firewall: CLI and daemon in one binary.
// main only wires: the commands live in internal/cli.
package main

import (
	"os"

	"github.com/xdpfw/xdpfw/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
