package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/gcompose/gcompose/internal/vpnwire"
)

// runVPN is `devnet-init vpn SOCKET TOKEN CIDR...`: it connects to the devnet's socket, creates a TUN
// device per VPN (vpn0, vpn1, ... in the order given) holding the node's address CIDR, and relays the
// packets between the devices and the devnet until either side ends. The devnet asks it for the TCP
// tunnels' connections too (FrameDial): it dials the node's own VPN address and streams the bytes over a
// connection of their own. Nothing else is routed: no default route, as a provider's VM on a VPN.
func runVPN(sock, token string, cidrs []string) error {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return fmt.Errorf("vpn: connecting to the devnet at %s: %w", sock, err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "vpn %s\n", token); err != nil {
		return fmt.Errorf("vpn: greeting the devnet: %w", err)
	}
	var wmu sync.Mutex
	send := func(f vpnwire.Frame) error {
		wmu.Lock()
		defer wmu.Unlock()
		return vpnwire.Write(conn, f)
	}
	tuns, addrs, err := setupTUNs(cidrs)
	if err != nil {
		_ = send(vpnwire.Frame{Type: vpnwire.FrameError, Payload: []byte(err.Error())})
		return err
	}
	if err := send(vpnwire.Frame{Type: vpnwire.FrameReady}); err != nil {
		return fmt.Errorf("vpn: telling the devnet the VPN is up: %w", err)
	}
	for i, tun := range tuns {
		go func() {
			buf := make([]byte, vpnwire.MaxPayload)
			for {
				n, err := tun.Read(buf)
				if err != nil {
					_ = conn.Close()
					return
				}
				if err := send(vpnwire.Frame{Type: vpnwire.FramePacket, VPN: byte(i), Payload: buf[:n]}); err != nil {
					return
				}
			}
		}()
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		f, err := vpnwire.Read(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("vpn: reading from the devnet: %w", err)
		}
		if int(f.VPN) >= len(tuns) {
			continue
		}
		switch f.Type {
		case vpnwire.FramePacket:
			// A packet the TUN refuses (malformed) is dropped, as a NIC drops it.
			_, _ = tuns[f.VPN].Write(f.Payload)
		case vpnwire.FrameDial:
			go dialFor(sock, token, addrs[f.VPN], string(f.Payload))
		}
	}
}

// dialFor answers a FrameDial ("<id> <port>"): it dials addr:port and hands the connection to the devnet
// over a new connection to its socket.
func dialFor(sock, token string, addr net.IP, req string) {
	id, portText, _ := strings.Cut(req, " ")
	port, err := strconv.Atoi(portText)
	if err != nil || strings.ContainsAny(id, " \n") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var d net.Dialer
	tcp, dialErr := d.DialContext(ctx, "tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	back, err := net.Dial("unix", sock)
	if err != nil {
		if tcp != nil {
			_ = tcp.Close()
		}
		return
	}
	defer back.Close()
	if dialErr != nil {
		_, _ = fmt.Fprintf(back, "tcp %s %s err %s\n", token, id, strings.ReplaceAll(dialErr.Error(), "\n", " "))
		return
	}
	defer tcp.Close()
	if _, err := fmt.Fprintf(back, "tcp %s %s ok\n", token, id); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(tcp, back)
		_ = tcp.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(back, tcp)
		_ = back.(*net.UnixConn).CloseWrite()
		done <- struct{}{}
	}()
	<-done
	<-done
}

// setupTUNs creates the TUN devices, gives each its address (the VPN's range is then a connected route
// there) and brings it and the loopback up.
func setupTUNs(cidrs []string) ([]*os.File, []net.IP, error) {
	if lo, err := netlink.LinkByName("lo"); err == nil {
		_ = netlink.LinkSetUp(lo)
	}
	var tuns []*os.File
	var addrs []net.IP
	for i, cidr := range cidrs {
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return nil, nil, fmt.Errorf("vpn: VPN address %q: %w", cidr, err)
		}
		name := "vpn" + strconv.Itoa(i)
		tun, err := openTUN(name)
		if err != nil {
			return nil, nil, err
		}
		link, err := netlink.LinkByName(name)
		if err != nil {
			return nil, nil, fmt.Errorf("vpn: the TUN device %s: %w", name, err)
		}
		if err := netlink.LinkSetMTU(link, vpnwire.MTU); err != nil {
			return nil, nil, fmt.Errorf("vpn: MTU of %s: %w", name, err)
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return nil, nil, fmt.Errorf("vpn: adding %s to %s: %w", cidr, name, err)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return nil, nil, fmt.Errorf("vpn: bringing %s up: %w", name, err)
		}
		tuns = append(tuns, tun)
		addrs = append(addrs, addr.IP)
	}
	return tuns, addrs, nil
}

// openTUN creates the TUN device name (IP packets without the packet information header) and returns its
// file, read and written through the runtime's poller.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("vpn: opening /dev/net/tun (the container needs the device and CAP_NET_ADMIN): %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("vpn: %w", err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("vpn: creating the TUN device %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}
