// Command devnet-web is the devnet demo's web service. It talks to devnet-db across the VPN:
//
//	devnet-web --db-address 192.168.0.2 --db-port 4001 initdb   # write the greeting record, check it reads back
//	devnet-web --db-address 192.168.0.2 --db-port 4001 run      # serve the page on :80
//
// Every page view writes a visit record to the database and renders the page from what it reads back.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

type db struct {
	base string
	hc   *http.Client
}

func (d db) put(ctx context.Context, key, value string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, d.base+"/db/"+key, strings.NewReader(value))
	if err != nil {
		return err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return fmt.Errorf("writing %s to the database: %w", key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("writing %s to the database: HTTP %d", key, resp.StatusCode)
	}
	return nil
}

type record struct{ Key, Value string }

func (d db) all(ctx context.Context) ([]record, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/db", nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the database: %w", err)
	}
	defer resp.Body.Close()
	var out []record
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading the database: %w", err)
	}
	return out, nil
}

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><title>gcompose devnet webapp</title></head>
<body>
<h1>gcompose devnet webapp</h1>
<p>Served by {{.Host}}; database at {{.DB}} (across the VPN). This visit was stored as <code>{{.Key}}</code>.</p>
<ul>
{{range .Records}}<li><code>{{.Key}}</code>: {{.Value}}</li>
{{end}}</ul>
<p>{{len .Records}} records read back from the database.</p>
</body></html>
`))

// initDB stores the greeting, trying again for up to patience, as a payload on Golem must: what runs
// first only waits for the database's init commands to have run (dapp-runner's depends_on waits for the
// service to be running, dapp_runner/runner/runner.py _start_service), not for the database to answer,
// and yagna tells the database's node of this one without waiting for it (core/vpn/src/network.rs,
// Handler<AddNode> spawns VpnControl::AddNodes), so the first packets may go unanswered.
func initDB(d db, greeting string, patience time.Duration) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := d.put(ctx, "greeting", greeting)
		cancel()
		if err == nil {
			return nil
		}
		if time.Since(start) >= patience {
			return fmt.Errorf("the database at %s did not take the greeting in %s (%d attempts); the last: %w", d.base, time.Since(start).Round(time.Second), attempt, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func main() {
	addr := flag.String("db-address", "", "database node IP")
	port := flag.Int("db-port", 4001, "database port")
	listen := flag.String("listen", ":80", "address to serve on (run)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *addr == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: devnet-web --db-address IP [--db-port 4001] [--listen :80] initdb|run")
		os.Exit(2)
	}
	// A connection that gets no answer fails on its own (dial tcp ...: i/o timeout), so that initdb reports
	// why it gave up rather than its own deadline.
	transport := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	d := db{base: fmt.Sprintf("http://%s:%d", *addr, *port), hc: &http.Client{Transport: transport, Timeout: 10 * time.Second}}
	host, _ := os.Hostname()
	switch flag.Arg(0) {
	case "initdb":
		if err := initDB(d, "Hello from "+host+" through the devnet VPN", time.Minute); err != nil {
			fmt.Fprintln(os.Stderr, "initdb:", err)
			os.Exit(1)
		}
		fmt.Println("initdb: greeting stored at", d.base)
	case "run":
		var visits atomic.Int64
		http.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
			n := visits.Add(1)
			key := fmt.Sprintf("visit-%s-%06d", host, n)
			if err := d.put(r.Context(), key, time.Now().UTC().Format(time.RFC3339)+" from "+r.RemoteAddr); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			recs, err := d.all(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = page.Execute(w, map[string]any{"Host": host, "DB": d.base, "Key": key, "Records": recs})
		})
		log.Info("devnet-web listening", "addr", *listen, "db", d.base)
		srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second}
		if err := srv.ListenAndServe(); err != nil {
			log.Error("devnet-web", "err", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown command", flag.Arg(0))
		os.Exit(2)
	}
}
