package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdpfw/xdpfw/internal/packet"
	"github.com/xdpfw/xdpfw/testutil"
)

// natFlow is one connection of TestNATDifferentialXdpfw: from a client
// address and port to a server address, its own server port (run's base
// + index), over proto; closed: no server listens (a UDP port
// unreachable comes back).
type natFlow struct {
	client, server string
	cport          int
	proto          string // udp, tcp, icmp
	closed         bool
}

// natSeen is what a run saw of a flow: the first packet's tuple as it
// reached the server (after the router's translation), its checksums, and
// the ICMP error the client received (closed flows).
type natSeen struct {
	src, dst string // the source addr:port (ICMP: addr:id), the destination address
	sumsOK   bool
	answered bool
	icmpErr  string // outer source, and the quoted tuple
}

// TestNATDifferentialXdpfw: the same random flows (TCP, UDP, ping, from
// three client addresses to two server addresses; a SNAT with a port
// range, a SNAT without one, MASQUERADE for the rest) cross a router whose
// kernel translates them (iptables' nat table) and then the same router
// with xdpfw translating (--nat xdpfw). What reaches the servers carries
// the same translated addresses, and the same ports where the kernel's
// choice is deterministic (its own port when it is free and in the range;
// a port picked from a range otherwise: then only in the range), valid
// checksums; every flow is answered; the port unreachable of a closed UDP
// port reaches the client alike (outer source, quoted tuple). Seeded.
func TestNATDifferentialXdpfw(t *testing.T) {
	testutil.RequireRoot(t)
	x := newRouter(t)
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	router := x.lb.srv4
	clients := []string{x.la.cli4, "10.200.1.3", "10.200.1.4"}
	servers := []string{x.lb.cli4, "10.200.2.3"}
	for _, c := range [][]string{{"ip", "addr", "add", "10.200.1.3/24", "dev", "xa"}, {"ip", "addr", "add", "10.200.1.4/24", "dev", "xa"}} {
		if out, err := x.a.Exec(ctx, c[0], c[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	for _, c := range [][]string{{"ip", "addr", "add", "10.200.2.3/24", "dev", "xb"}, {"ip", "route", "del", "default"}} {
		if out, err := x.b.Exec(ctx, c[0], c[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	natTable := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A POSTROUTING -s 10.200.1.3 -o rb -p udp -j SNAT --to-source " + router + ":20000-20099\n" +
		"-A POSTROUTING -s 10.200.1.4 -o rb -j SNAT --to-source " + router + "\n" +
		"-A POSTROUTING -o rb -j MASQUERADE\nCOMMIT\n"
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("XDPFW_NATDIFF_SEED"); v != "" { // to run a logged seed again
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("XDPFW_NATDIFF_SEED: %v", err)
		}
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 16))
	var flows []natFlow
	used := map[string]bool{}
	for len(flows) < 18 {
		f := natFlow{client: clients[rng.IntN(len(clients))], server: servers[rng.IntN(len(servers))],
			cport: 30000 + rng.IntN(20000), proto: []string{"udp", "tcp", "icmp"}[rng.IntN(3)]}
		f.closed = f.proto == "udp" && rng.IntN(4) == 0
		if k := f.client + ":" + fmt.Sprint(f.cport); !used[k] {
			used[k] = true
			flows = append(flows, f)
		}
	}
	vethPeerReady(t, x.a, "xa") // finished checksums: the server's capture checks them
	capB := newCapture(t, x.b, "xb")
	icmpA := icmpListen(t, x.a)

	run := func(base int) []natSeen {
		t.Helper()
		seen := make([]natSeen, len(flows))
		for i, f := range flows {
			sport := base + i
			s := &seen[i]
			tag := fmt.Sprintf("flow-%d-%d", base, i)
			switch f.proto {
			case "udp":
				if !f.closed {
					var pc net.PacketConn
					if err := x.b.Do(func() (err error) { pc, err = net.ListenPacket("udp4", hostPort(f.server, sport)); return err }); err != nil {
						t.Fatal(err)
					}
					go func() {
						b := make([]byte, 100)
						if n, from, err := pc.ReadFrom(b); err == nil {
							_, _ = pc.WriteTo(b[:n], from)
						}
					}()
					defer pc.Close()
				}
				var c *net.UDPConn
				if err := x.a.Do(func() (err error) {
					c, err = net.DialUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(hostPort(f.client, f.cport))),
						net.UDPAddrFromAddrPort(netip.MustParseAddrPort(hostPort(f.server, sport))))
					return err
				}); err != nil {
					t.Fatal(err)
				}
				_, _ = c.Write([]byte(tag))
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				b := make([]byte, 100)
				n, err := c.Read(b)
				c.Close()
				if f.closed {
					s.answered = errors.Is(err, syscall.ECONNREFUSED)
					for _, m := range icmpA(300 * time.Millisecond) {
						// the server's port is the run's: left out
						qdst := strings.TrimSuffix(m.qdst, fmt.Sprintf(":%d", sport))
						s.icmpErr += fmt.Sprintf("from %s type %d/%d quoting %s > %s checksum ok %v; ", m.from, m.typ, m.code, m.qsrc, qdst, m.ok)
					}
				} else {
					s.answered = err == nil && string(b[:n]) == tag
				}
			case "tcp":
				var ln net.Listener
				if err := x.b.Do(func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", sport)); return err }); err != nil {
					t.Fatal(err)
				}
				go func() {
					if c, err := ln.Accept(); err == nil {
						fmt.Fprintln(c, tag)
						c.Close()
					}
				}()
				var c net.Conn
				err := x.a.Do(func() (err error) {
					// the client's port is the kernel run's too, where its
					// socket may be in TIME_WAIT still (a simultaneous close):
					// SO_REUSEADDR binds it again for the new server port
					d := net.Dialer{Timeout: connectTimeout, LocalAddr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(hostPort(f.client, f.cport))),
						Control: func(_, _ string, rc syscall.RawConn) error {
							var serr error
							if err := rc.Control(func(fd uintptr) {
								serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
							}); err != nil {
								return err
							}
							return serr
						}}
					c, err = d.Dial("tcp4", hostPort(f.server, sport))
					return err
				})
				var ne net.Error
				if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
					t.Errorf("%s: connecting: %v", tag, err) // not the firewall's doing: a dropped SYN times out
				}
				if err == nil {
					_ = c.SetDeadline(time.Now().Add(2 * time.Second))
					line, _ := bufio.NewReader(c).ReadString('\n')
					s.answered = strings.TrimSpace(line) == tag
					c.Close()
				}
				ln.Close()
			case "icmp":
				// an echo request with id cport, payload tag, from the client address
				var c net.PacketConn
				if err := x.a.Do(func() (err error) { c, err = net.ListenPacket("ip4:icmp", f.client); return err }); err != nil {
					t.Fatal(err)
				}
				m := append([]byte{8, 0, 0, 0, byte(f.cport >> 8), byte(f.cport), 0, 1}, tag...)
				binary.BigEndian.PutUint16(m[2:], packet.Checksum(m))
				_, _ = c.WriteTo(m, &net.IPAddr{IP: net.ParseIP(f.server)})
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				b := make([]byte, 200)
				for {
					n, _, err := c.ReadFrom(b)
					if err != nil {
						break
					}
					if n >= 8 && b[0] == 0 && strings.Contains(string(b[8:n]), tag) {
						s.answered = binary.BigEndian.Uint16(b[4:]) == uint16(f.cport)
						break
					}
				}
				c.Close()
			}
			// the first packet of the flow as it reached the server
			fr := capB.next(func(p *packet.Packet) bool {
				if p.Dst.String() != f.server {
					return false
				}
				switch f.proto {
				case "tcp":
					return p.Proto == 6 && int(p.DPort) == sport && p.TCPFlags&packet.TCPSyn != 0
				case "udp":
					return p.Proto == 17 && int(p.DPort) == sport
				}
				return p.Proto == 1 && strings.Contains(string(p.Payload), tag)
			})
			if fr == nil {
				continue
			}
			ip := fr[14:]
			ihl := int(ip[0]&0xf) * 4
			tot := int(binary.BigEndian.Uint16(ip[2:]))
			src, _ := netip.AddrFromSlice(ip[12:16])
			dst, _ := netip.AddrFromSlice(ip[16:20])
			seg := ip[ihl:tot]
			sp := binary.BigEndian.Uint16(seg[0:])
			ok := packet.Checksum(ip[:ihl]) == 0
			switch f.proto {
			case "icmp":
				sp = binary.BigEndian.Uint16(seg[4:]) // the echo id
				ok = ok && packet.Checksum(seg) == 0
			default:
				ok = ok && packet.L4Checksum(src, dst, ip[9], seg) == 0
			}
			s.src, s.dst, s.sumsOK = hostPort(src.String(), int(sp)), dst.String(), ok
		}
		return seen
	}

	kernelNAT(t, x.r, "-A", "POSTROUTING", "-s", "10.200.1.3", "-o", "rb", "-p", "udp", "-j", "SNAT", "--to-source", router+":20000-20099")
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-s", "10.200.1.4", "-o", "rb", "-j", "SNAT", "--to-source", router)
	kernelNAT(t, x.r, "-A", "POSTROUTING", "-o", "rb", "-j", "MASQUERADE")
	iptablesRestoreText(t, x.r, masqRules)
	kernel := run(41000)
	iptablesRestoreText(t, x.r, "")
	kernelNAT(t, x.r, "-F")

	fw := newFW(t, x.r)
	fw.mustRun("load", "-i", "ra", "-i", "rb", "--nat", "xdpfw", "--ipv4-file", writeRules(t, "diff.rules", natTable+masqRules))
	xdp := run(42000)

	for i, f := range flows {
		k, g := kernel[i], xdp[i]
		what := fmt.Sprintf("flow %d %s %s:%d > %s", i, f.proto, f.client, f.cport, f.server)
		if f.closed {
			// the error the client got; the same both ways
			if !k.answered || k.icmpErr == "" {
				t.Errorf("%s (closed): the kernel's run: refused %v, error %q", what, k.answered, k.icmpErr)
			}
			if g.answered != k.answered || g.icmpErr != k.icmpErr {
				t.Errorf("%s (closed): xdpfw: refused %v, error %q; the kernel: refused %v, error %q", what, g.answered, g.icmpErr, k.answered, k.icmpErr)
			}
		} else if !k.answered || !g.answered {
			t.Errorf("%s: answered: kernel %v, xdpfw %v", what, k.answered, g.answered)
		}
		if k.src == "" || g.src == "" {
			t.Errorf("%s: no first packet captured at the server (kernel %q, xdpfw %q)", what, k.src, g.src)
			continue
		}
		if !k.sumsOK || !g.sumsOK {
			t.Errorf("%s: checksums valid at the server: kernel %v, xdpfw %v", what, k.sumsOK, g.sumsOK)
		}
		ka, kp, _ := net.SplitHostPort(k.src)
		ga, gp, _ := net.SplitHostPort(g.src)
		if ka != ga || k.dst != g.dst {
			t.Errorf("%s: translated %s > %s, the kernel's %s > %s", what, g.src, g.dst, k.src, k.dst)
		}
		ranged := f.client == "10.200.1.3" && f.proto == "udp"
		if ranged { // the client's port is not in 20000-20099: picked from the range, not deterministic
			var p int
			fmt.Sscan(gp, &p)
			if p < 20000 || p > 20099 {
				t.Errorf("%s: translated port %s, want one of 20000-20099 (the kernel picked %s)", what, gp, kp)
			}
		} else if kp != gp {
			t.Errorf("%s: translated port %s, the kernel's %s", what, gp, kp)
		}
	}
}
