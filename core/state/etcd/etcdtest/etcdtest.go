// Package etcdtest starts real etcd servers for tests: one member, or a
// cluster of several, on loopback ports, each in a temporary directory, all
// stopped when the test ends. The binary is "etcd" from PATH (Debian's
// etcd-server package) or $GCOMPOSE_ETCD_BINARY. Without it a test is
// skipped, unless CI is set: then it fails.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary returns the etcd binary, skipping the test when there is none and
// CI is not set.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("GCOMPOSE_ETCD_BINARY"); b != "" {
		return b
	}
	b, err := exec.LookPath("etcd")
	if err == nil {
		return b
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("etcd binary not found (%v); CI installs Debian's etcd-server in .ci/run", err)
	}
	t.Skipf("etcd binary not found (%v): apt-get install etcd-server to run this test", err)
	return ""
}

// Member is one etcd server process.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	Dir       string
	bin       string
	args      []string
	logPath   string
	tls       *TLSFiles

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Cluster is a set of members forming one etcd cluster.
type Cluster struct {
	Members []*Member
	// TLS is set for a cluster started by StartTLS: its client URLs are
	// https and require a client certificate signed by TLS.CA.
	TLS *TLSFiles
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL
	}
	return out
}

// HostPorts are the members' client addresses ("127.0.0.1:port"), as in an
// etcd:// state URL.
func (c *Cluster) HostPorts() string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = strings.TrimPrefix(strings.TrimPrefix(m.ClientURL, "http://"), "https://")
	}
	return strings.Join(out, ",")
}

// Start starts a single-member cluster.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartTLS starts a single member whose clients must use TLS with a client
// certificate (Cluster.TLS has the files).
func StartTLS(t testing.TB) *Cluster { return start(t, 1, true) }

// StartCluster starts an n-member cluster on 127.0.0.1 with distinct client
// and peer ports and waits until it is healthy. Heartbeat 50 ms and election
// timeout 500 ms: failover takes about a second, and lease TTLs down to 1 s
// are honoured.
func StartCluster(t testing.TB, n int) *Cluster { return start(t, n, false) }

func start(t testing.TB, n int, useTLS bool) *Cluster {
	t.Helper()
	bin := Binary(t)
	var files *TLSFiles
	if useTLS {
		var err error
		if files, err = newTLSFiles(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	for try := 0; ; try++ {
		c, err := startCluster(t, bin, n, files)
		if err == nil {
			return c
		}
		if try == 2 {
			t.Fatalf("start etcd cluster of %d: %v", n, err)
		}
		t.Logf("start etcd cluster of %d: %v; retrying with other ports", n, err)
	}
}

func startCluster(t testing.TB, bin string, n int, files *TLSFiles) (*Cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	base := t.TempDir()
	c := &Cluster{TLS: files}
	scheme := "http"
	if files != nil {
		scheme = "https"
	}
	var initial []string
	for i := range n {
		m := &Member{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
			Dir:       filepath.Join(base, fmt.Sprintf("m%d", i)),
			bin:       bin,
		}
		m.logPath = m.Dir + ".log"
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.args = []string{
			"--name", m.Name,
			"--data-dir", m.Dir,
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", fmt.Sprintf("gcompose-test-%d", ports[0]),
			"--heartbeat-interval", "50",
			"--election-timeout", "500",
			"--logger", "zap",
			"--log-outputs", "stderr",
			"--log-level", "warn",
		}
		if files != nil {
			m.args = append(m.args, "--cert-file", files.ServerCert, "--key-file", files.ServerKey,
				"--trusted-ca-file", files.CA, "--client-cert-auth")
			m.tls = files
		}
		if err := m.start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			for _, m := range c.Members {
				if b, err := os.ReadFile(m.logPath); err == nil {
					t.Logf("etcd %s log (last 4 kB):\n%s", m.Name, tail(b, 4096))
				}
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range c.Members {
		if err := m.waitHealthy(deadline); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (c *Cluster) stop() {
	for _, m := range c.Members {
		m.Kill()
	}
}

func (m *Member) start() error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("etcd %s log: %w", m.Name, err)
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start etcd %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	return nil
}

// Kill stops the member at once (SIGKILL), as a crash or a power loss would.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts a killed member again on the same ports and data.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	for i, a := range m.args {
		if a == "--initial-cluster-state" {
			m.args[i+1] = "existing"
		}
	}
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
	if err := m.waitHealthy(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
}

// Running says whether the member's process runs.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

func (m *Member) waitHealthy(deadline time.Time) error {
	var last error
	for time.Now().Before(deadline) {
		m.mu.Lock()
		done := m.done
		m.mu.Unlock()
		select {
		case <-done:
			b, _ := os.ReadFile(m.logPath)
			return fmt.Errorf("etcd %s exited: %s", m.Name, tail(b, 2048))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.ClientURL+"/health", nil)
		client := http.DefaultClient
		if m.tls != nil {
			tc, err := m.tls.Config()
			if err != nil {
				cancel()
				return err
			}
			client = &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		}
		resp, err := client.Do(req)
		if err == nil {
			var buf [256]byte
			k, _ := resp.Body.Read(buf[:])
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(buf[:k]), `"true"`) {
				cancel()
				return nil
			}
			err = fmt.Errorf("health: %s %s", resp.Status, buf[:k])
		}
		cancel()
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("etcd %s not healthy: %v", m.Name, last)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
