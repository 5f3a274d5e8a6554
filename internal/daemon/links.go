package daemon

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
	"github.com/xdpfw/xdpfw/internal/firewall"
)

// watchLinks reports, by name, each configured interface that appears or
// changes (netlink RTM_NEWLINK) while xdpfw does not filter it: an
// interface deleted and created again (a VM's tap, a container's veth, a
// NIC whose driver was reloaded) comes back without the program, its
// old link severed. The daemon then reloads, and the reload attaches it
// again (firewall.Reconcile sees it unfiltered). It watches until done is
// closed; nil if the kernel's link events cannot be had (then SIGHUP
// repairs). The second channel reports (coalesced) any interface created,
// removed or renamed while the rules in force have FORWARD -o, whose
// names resolve against every interface of the host: the reload then
// compiles them again if what they name changed (firewall.Reconcile).
func (d *Daemon) watchLinks(done <-chan struct{}) (<-chan string, <-chan struct{}) {
	known := map[int]string{} // ifindex -> name, as last seen
	if list, err := netlink.LinkList(); err == nil {
		for _, l := range list {
			known[l.Attrs().Index] = l.Attrs().Name
		}
	}
	updates := make(chan netlink.LinkUpdate, 64)
	err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) {
			d.log().Warn("interface events lost; SIGHUP attaches re-created interfaces again", "error", err.Error())
		}})
	if err != nil {
		d.log().Warn("interface events not watched; SIGHUP attaches re-created interfaces again", "error", err.Error())
		return nil, nil
	}
	out, set := make(chan string, 4), make(chan struct{}, 1)
	go func() {
		for u := range updates {
			name, idx := u.Attrs().Name, u.Attrs().Index
			changed := false
			switch u.Header.Type {
			case unix.RTM_NEWLINK:
				changed = known[idx] != name
				known[idx] = name
			case unix.RTM_DELLINK:
				_, changed = known[idx]
				delete(known, idx)
			}
			if changed && d.namesOut.Load() {
				select {
				case set <- struct{}{}:
				default: // a reload is pending already
				}
			}
			if u.Header.Type != unix.RTM_NEWLINK || !slices.ContainsFunc(d.config().Interfaces, func(i Interface) bool { return i.Name == name }) {
				continue
			}
			if s := datapath.InterfaceState(d.Paths.PinDir, name); s.Filtering && s.Problem == "" {
				continue
			}
			select {
			case out <- name:
			default: // a reload is pending already
			}
		}
	}()
	return out, set
}

// watchLocalRoutes reports (coalesced) each change of the kernel's local
// routing table (table 255: addresses added or removed, broadcast
// routes), which -m addrtype decides on: the daemon then writes the data
// plane's copy again (firewall.RefreshAddrTypes). nil if route events
// cannot be had (then a reload, SIGHUP, refreshes it).
func (d *Daemon) watchLocalRoutes(done <-chan struct{}) <-chan struct{} {
	updates := make(chan netlink.RouteUpdate, 64)
	err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{
		ErrorCallback: func(err error) {
			d.log().Warn("route events lost; SIGHUP refreshes -m addrtype's table", "error", err.Error())
		}})
	if err != nil {
		d.log().Warn("route events not watched; SIGHUP refreshes -m addrtype's table", "error", err.Error())
		return nil
	}
	out := make(chan struct{}, 1)
	go func() {
		for u := range updates {
			if u.Table != unix.RT_TABLE_LOCAL {
				continue
			}
			select {
			case out <- struct{}{}:
			default: // a refresh is pending already
			}
		}
	}()
	return out
}

// pppoePoll is how often the daemon reads the kernel's PPPoE sessions
// when no ppp device came or went (a session's own changes make no event).
const pppoePoll = 2 * time.Second

// watchPPPoE reports (coalesced) each change of the kernel's PPPoE
// sessions the data plane must follow (docs/pppoe.md): a ppp device
// created or removed (pppd makes one per connection, after the session
// and before IP can flow: netlink RTM_NEWLINK / RTM_DELLINK), and any
// change of /proc/net/pppoe seen by reading it every pppoePoll.
func (d *Daemon) watchPPPoE(done <-chan struct{}) <-chan struct{} {
	out := make(chan struct{}, 1)
	kick := func() {
		select {
		case out <- struct{}{}:
		default: // a refresh is pending already
		}
	}
	updates := make(chan netlink.LinkUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) {
			d.log().Warn("interface events lost; PPPoE sessions are read every few seconds", "error", err.Error())
		}}); err != nil {
		d.log().Warn("interface events not watched; PPPoE sessions are read every few seconds", "error", err.Error())
		updates = nil
	}
	go func() {
		last, _ := os.ReadFile(firewall.ProcPPPoE)
		tick := time.NewTicker(pppoePoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case u, ok := <-updates:
				if !ok {
					updates = nil
					continue
				}
				if u.Attrs().EncapType == "ppp" {
					kick()
				}
			case <-tick.C:
				if now, _ := os.ReadFile(firewall.ProcPPPoE); !bytes.Equal(now, last) {
					last = now
					kick()
				}
			}
		}
	}()
	return out
}

// refreshPPPoE writes the kernel's PPPoE sessions into the data plane,
// logging why any are left unpaired when that changes. It reports whether
// the sessions' ppp devices changed (a reconnect makes a new device):
// `-i ppp0` must then be compiled again.
func (d *Daemon) refreshPPPoE() bool {
	ss, why, err := firewall.RefreshPPPoE(d.Paths)
	if err != nil {
		d.log().Warn("PPPoE sessions changed; the data plane's copy not refreshed", "error", err.Error())
		return false
	}
	if s := strings.Join(why, "; "); s != d.pppoeWhy {
		d.pppoeWhy = s
		if s != "" {
			d.log().Warn("PPPoE sessions not paired with their ppp devices", "why", s)
		}
	}
	devs := pppoeDevices(ss)
	changed := devs != d.pppoeDevs
	d.pppoeDevs = devs
	return changed
}

// pppoeDevices names the sessions' ppp devices with their ifindexes.
func pppoeDevices(ss []datapath.PPPoESession) string {
	var b strings.Builder
	for _, s := range ss {
		fmt.Fprintf(&b, "%s=%d ", s.PPPName, s.PPP)
	}
	return b.String()
}
