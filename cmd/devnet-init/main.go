// Command devnet-init is what the devnet puts into every payload container, whatever its image: PID 1
// of the container, and the tool that joins it to its VPNs from outside the payload's own files.
//
// Otherwise (any other arguments are ignored) it is PID 1: it stays alive for ever (the VM of a provider runs until the activity
// ends, and processes that an ExeScript `run` starts in the background keep running after the exec
// returns), reaps orphaned children, and exits on SIGTERM or SIGINT.
//
// `devnet-init join-vpn LINK-IP VPN-CIDR MAC` gives the interface that holds LINK-IP (the container's
// address on the VPN's macvlan network) the MAC and the VPN address VPN-CIDR, and deletes the default
// route: nothing leaves the VPN. It talks netlink itself, so the payload's image needs no shell and no
// `ip`.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/vishvananda/netlink"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "join-vpn" {
		if len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: devnet-init join-vpn LINK-IP VPN-CIDR MAC")
			os.Exit(2)
		}
		if err := joinVPN(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	hold()
}

func hold() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

func joinVPN(linkIP, cidr, mac string) error {
	want := net.ParseIP(linkIP)
	if want == nil {
		return fmt.Errorf("join-vpn: link address %q is not an IP address", linkIP)
	}
	vpnAddr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return fmt.Errorf("join-vpn: VPN address %q: %w", cidr, err)
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return fmt.Errorf("join-vpn: MAC %q: %w", mac, err)
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("join-vpn: listing the container's addresses: %w", err)
	}
	var link netlink.Link
	for _, a := range addrs {
		if a.IP.Equal(want) {
			if link, err = netlink.LinkByIndex(a.LinkIndex); err != nil {
				return fmt.Errorf("join-vpn: the interface holding %s: %w", linkIP, err)
			}
			break
		}
	}
	if link == nil {
		return fmt.Errorf("join-vpn: no interface of the container holds %s (its address on the VPN's link network)", linkIP)
	}
	if err := netlink.LinkSetHardwareAddr(link, hw); err != nil {
		return fmt.Errorf("MAC %s of VPN address %s is taken on this VPN's link: another running node holds that address (%s: %w)", mac, vpnAddr.IP, link.Attrs().Name, err)
	}
	if err := netlink.AddrAdd(link, vpnAddr); err != nil {
		return fmt.Errorf("join-vpn: adding %s to %s: %w", cidr, link.Attrs().Name, err)
	}
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("join-vpn: listing routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() && isZero(r.Dst.Mask) {
			if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("join-vpn: deleting the default route via %s: %w", r.Gw, err)
			}
		}
	}
	return nil
}

func isZero(m net.IPMask) bool {
	for _, b := range m {
		if b != 0 {
			return false
		}
	}
	return true
}
