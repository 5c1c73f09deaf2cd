package proxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
)

// Dialer opens the websocket that tunnels a TCP stream to a port of a VPN
// node (*yagna.Client).
type Dialer interface {
	DialTCP(ctx context.Context, networkID, ip string, port int) (*websocket.Conn, error)
}

// Forward is one listening port of the proxy.
type Forward struct {
	Listen string // 127.0.0.1:8080
	Remote int
}

// Serve accepts on every forward and tunnels each connection to ip:remote
// in the VPN until ctx ends. ready is called once every port listens.
func Serve(ctx context.Context, d Dialer, log *slog.Logger, networkID, ip string, fwds []Forward, ready func()) error {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for _, f := range fwds {
		l, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("listening on %s: %w", f.Listen, err)
		}
		ls = append(ls, l)
	}
	ready()
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
						log.Warn("accept", "listen", fwds[i].Listen, "err", err)
					}
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					tunnel(ctx, d, log, c, networkID, ip, fwds[i].Remote)
				}()
			}
		}()
	}
	<-ctx.Done()
	for _, l := range ls {
		l.Close()
	}
	wg.Wait()
	return nil
}

func tunnel(ctx context.Context, d Dialer, log *slog.Logger, c net.Conn, networkID, ip string, port int) {
	defer c.Close()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	ws, err := d.DialTCP(dctx, networkID, ip, port)
	cancel()
	if err != nil {
		log.Warn("tunnel", "to", ip+":"+strconv.Itoa(port), "err", err)
		return
	}
	// The connection lives as long as the proxy, not as long as the dial.
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	r := websocket.NetConn(cctx, ws, websocket.MessageBinary)
	defer r.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(r, c); closeWrite(r); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, r); closeWrite(c); done <- struct{}{} }()
	select {
	case <-done:
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

type mapsFlag []string

func (m *mapsFlag) String() string     { return strings.Join(*m, ",") }
func (m *mapsFlag) Set(s string) error { *m = append(*m, s); return nil }

// MainProxy is the proxy container's main: args after "proxy", secrets on
// stdin, the ready line on stdout, logs on stderr.
func MainProxy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	fs := flag.NewFlagSet(ProxyArg, flag.ContinueOnError)
	fs.SetOutput(stderr)
	netID := fs.String("network", "", "VPN id")
	ip := fs.String("ip", "", "node address in the VPN")
	var maps mapsFlag
	fs.Var(&maps, "map", "KIND:LISTEN_HOST:LISTEN_PORT=REMOTE_PORT (repeatable)")
	if err := fs.Parse(args); err != nil || *netID == "" || *ip == "" || len(maps) == 0 {
		fmt.Fprintln(stderr, "usage: proxy --network ID --ip IP --map http:127.0.0.1:8080=80 ... (secrets as JSON on stdin)")
		return 2
	}
	var fwds []Forward
	for _, m := range maps {
		spec, remote, ok := strings.Cut(m, "=")
		_, listen, ok2 := strings.Cut(spec, ":")
		port, err := strconv.Atoi(remote)
		if !ok || !ok2 || err != nil {
			fmt.Fprintf(stderr, "bad --map %q\n", m)
			return 2
		}
		fwds = append(fwds, Forward{Listen: listen, Remote: port})
	}
	yc, err := longlived.Connect(stdin, log)
	if err != nil {
		return 1
	}
	err = Serve(ctx, yc, log, *netID, *ip, fwds, func() {
		fmt.Fprintln(stdout, longlived.ReadyLine)
		log.Info("proxy listening", "maps", maps.String(), "target", *ip)
	})
	if err != nil {
		log.Error("proxy", "err", err)
		return 1
	}
	return 0
}
