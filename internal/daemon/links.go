package daemon

import (
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdpfw/xdpfw/internal/datapath"
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
