package devnet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/benchmetrics"
)

// TestSizeSweep deploys, re-deploys and destroys an app of N services on one VPN with the gcompose CLI,
// against a devnet with the default devnet.yaml's providers (so N services must fit within the default
// caps), several times in a row. After every destroy nothing of the app or the devnet may be left in the
// engine (containers, networks), and the engine must have answered a ping within engineAnswerWithin all
// along. Each cycle's deploy and destroy times are printed. Then two apps whose VPNs have the same range
// run at once, each VPN carrying its own traffic only (twoAppsOneRange).
//
// `make test` runs one cycle of 5 services. `make size-sweep` runs the full sweep:
// GCOMPOSE_SIZE_SWEEP_N cycles (default 10) of each size in GCOMPOSE_SIZE_SWEEP_SIZES (default 30).
// GCOMPOSE_HEAVY_LOCK names a lock file (flock) taken for each cycle and the setup, so that a long sweep
// on a shared machine holds it one cycle at a time.
func TestSizeSweep(t *testing.T) {
	sizes, cycles := []int{5}, 1
	if v := os.Getenv("GCOMPOSE_SIZE_SWEEP_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("GCOMPOSE_SIZE_SWEEP_SIZES=%q: want sizes such as 10,30", v)
			}
			sizes = append(sizes, n)
		}
	}
	if v := os.Getenv("GCOMPOSE_SIZE_SWEEP_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("GCOMPOSE_SIZE_SWEEP_N=%q: want a number of cycles", v)
		}
		cycles = n
	}
	cfg, err := devnet.LoadConfig("devnet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lock := heavyLock(t)
	unlock := lock()
	g := startGolemBench(t, cfg.Providers)
	unlock()
	instance := "bench-" + strings.ToLower(unsafeChars.ReplaceAllString(t.Name(), "-"))

	// The engine must answer throughout: a ping every second, each given engineAnswerWithin.
	var (
		mu       sync.Mutex
		slowest  time.Duration
		failures []string
	)
	pingCtx, stopPing := context.WithCancel(g.ctx)
	var pinging sync.WaitGroup
	pinging.Add(1)
	go func() {
		defer pinging.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-pingCtx.Done():
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(pingCtx, engineAnswerWithin)
			start := time.Now()
			_, err := g.docker.Ping(ctx)
			took := time.Since(start)
			cancel()
			mu.Lock()
			slowest = max(slowest, took)
			if err != nil && pingCtx.Err() == nil {
				failures = append(failures, fmt.Sprintf("%s: %v", start.Format(time.TimeOnly), err))
			}
			mu.Unlock()
		}
	}()
	defer func() {
		stopPing()
		pinging.Wait()
		fmt.Printf("    %s: the engine's slowest ping answer %s; pings that failed: %d %v\n", t.Name(), slowest.Round(time.Millisecond), len(failures), failures)
		if len(failures) > 0 {
			t.Errorf("the engine did not answer a ping within %s %d time(s): %v", engineAnswerWithin, len(failures), failures)
		}
	}()

	for _, n := range sizes {
		for i := range cycles {
			app := fmt.Sprintf("size-%d-%d", n, i)
			unlock := lock()
			start := time.Now()
			deploy, redeploy, destroy := g.cycle(app, n)
			g.settle(app)
			left := leftInEngine(t, g, instance, app)
			unlock()
			fmt.Printf("    %s: %d services, cycle %d/%d: deploy %.2f s, re-deploy %.2f s, destroy %.2f s (cycle %.1f s, load %.2f)\n",
				t.Name(), n, i+1, cycles, deploy.wall.Seconds(), redeploy.wall.Seconds(), destroy.wall.Seconds(), time.Since(start).Seconds(), benchmetrics.LoadAvg())
			if left != "" {
				t.Fatalf("after the destroy of %s: left in the engine: %s", app, left)
			}
		}
	}
	unlock = lock()
	defer unlock()
	start := time.Now()
	twoAppsOneRange(t, g, instance)
	fmt.Printf("    %s: two apps with the same VPN range: %.1f s\n", t.Name(), time.Since(start).Seconds())
}

// twoAppsOneRange deploys two apps of 2 services whose VPNs have the same range (192.168.80.0/24, as every
// golemApp), their services' db on port 4001 in one app and 4002 in the other. Through each VPN's TCP tunnel
// (the Net API's, which the Golem proxy uses), each node of it answers on its app's port and none on the
// other's: the two VPNs, same addresses and all, carry their own traffic only. Then both are destroyed and
// nothing is left.
func twoAppsOneRange(t *testing.T, g *golemBench, instance string) {
	t.Helper()
	ports := map[string]int{"range-a": 4001, "range-b": 4002}
	for _, app := range []string{"range-a", "range-b"} {
		desc := filepath.Join(g.dir, app+".yaml")
		if err := os.WriteFile(desc, []byte(golemAppOn(app, 2, ports[app])), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.removeApp(app) })
		if r := g.run(app, "deploy", desc); r.changed != 4 {
			t.Fatalf("deploy of %s changed %d resources, want 4", app, r.changed)
		}
	}
	c := yagna.New(g.url, testKey)
	nets, err := c.Networks(g.ctx)
	if err != nil || len(nets) != 2 || nets[0].IP != nets[1].IP {
		t.Fatalf("the devnet's VPNs = %+v, %v; want two of one range", nets, err)
	}
	answering := map[int]int{} // port → how many VPNs answer on it at every node
	for _, n := range nets {
		nodes, err := c.Nodes(g.ctx, n.ID)
		if err != nil || len(nodes) != 2 {
			t.Fatalf("nodes of VPN %s = %+v, %v; want 2", n.ID, nodes, err)
		}
		for _, port := range []int{4001, 4002} {
			ok := 0
			for _, node := range nodes {
				if err := tunnelStatus(g, n.ID, node.IP, port); err != nil {
					t.Logf("VPN %s: %s:%d does not answer: %v", n.ID[:12], node.IP, port, err)
				} else {
					ok++
				}
			}
			switch ok {
			case len(nodes):
				answering[port]++
			case 0:
			default:
				t.Errorf("VPN %s: %d of %d nodes answered on port %d: all or none should", n.ID[:12], ok, len(nodes), port)
			}
		}
	}
	if answering[4001] != 1 || answering[4002] != 1 {
		t.Errorf("VPNs that answer on 4001: %d, on 4002: %d; want 1 each (each app's own port only)", answering[4001], answering[4002])
	}
	for _, app := range []string{"range-a", "range-b"} {
		if r := g.run(app, "destroy", filepath.Join(g.dir, app+".yaml")); r.changed != 4 {
			t.Errorf("destroy of %s changed %d resources, want 4", app, r.changed)
		}
		g.settle(app)
	}
	if left := leftInEngine(t, g, instance, "range-a") + leftInEngine(t, g, instance, "range-b"); left != "" {
		t.Errorf("after the destroy of both apps: left in the engine: %s", left)
	}
}

// tunnelStatus asks GET /status of the db at ip:port in a VPN through the Net API's TCP tunnel.
func tunnelStatus(g *golemBench, netID, ip string, port int) error {
	ctx, cancel := context.WithTimeout(g.ctx, 15*time.Second)
	defer cancel()
	u := fmt.Sprintf("ws%s/net-api/v1/net/%s/tcp/%s/%d", strings.TrimPrefix(g.url, "http"), netID, ip, port)
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + testKey}}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return err
	}
	conn := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /status HTTP/1.0\r\nHost: db\r\n\r\n"); err != nil {
		return err
	}
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", r.StatusCode)
	}
	return nil
}

// engineAnswerWithin is how long the engine may take to answer a ping before it counts as not answering.
const engineAnswerWithin = 10 * time.Second

// leftInEngine says what the devnet instance and the app left in the engine: containers and networks.
func leftInEngine(t *testing.T, g *golemBench, instance, app string) string {
	t.Helper()
	var left []string
	for _, f := range []filters.Args{
		filters.NewArgs(filters.Arg("label", "gcompose.devnet="+instance)),
		filters.NewArgs(filters.Arg("label", "gcompose.app="+app)),
	} {
		cs, err := g.docker.ContainerList(g.ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatalf("listing containers: %v", err)
		}
		for _, c := range cs {
			left = append(left, "container "+strings.Join(c.Names, ",")+" ("+c.State+")")
		}
		ns, err := g.docker.NetworkList(g.ctx, network.ListOptions{Filters: f})
		if err != nil {
			t.Fatalf("listing networks: %v", err)
		}
		for _, nw := range ns {
			left = append(left, "network "+nw.Name)
		}
	}
	return strings.Join(left, ", ")
}

// heavyLock returns a function that takes the lock file named by GCOMPOSE_HEAVY_LOCK (flock, as
// flock(1) takes it) and returns its release; without the variable it takes nothing.
func heavyLock(t *testing.T) func() (unlock func()) {
	path := os.Getenv("GCOMPOSE_HEAVY_LOCK")
	if path == "" {
		return func() func() { return func() {} }
	}
	return func() func() {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("opening the lock file: %v", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			t.Fatalf("taking the lock %s: %v", path, err)
		}
		t.Cleanup(func() { f.Close() }) // a cycle that failed releases it too
		return func() { f.Close() }     // closing the file releases the lock
	}
}
