package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// pagePoller asks the app's page every 100 ms and keeps the spans it did
// not answer.
type pagePoller struct {
	mu      sync.Mutex
	asked   int
	down    []span
	since   time.Time // start of the current failure, zero when answering
	lastErr string
	// slowest is the longest an answer took (the proxy holds a request
	// while its node is unreachable, for a while).
	slowest time.Duration
	stop    context.CancelFunc
	done    chan struct{}
}

type span struct {
	from, to time.Time
	err      string
}

func (s span) d() time.Duration { return s.to.Sub(s.from) }

func pollPage(ctx context.Context, url string) *pagePoller {
	ctx, cancel := context.WithCancel(ctx)
	p := &pagePoller{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			asked := time.Now()
			page, err := get(rctx, url)
			rcancel()
			took := time.Since(asked)
			if err == nil && !strings.Contains(page, "records read back from the database") {
				err = errors.New("the page does not read the database back")
			}
			now := time.Now()
			p.mu.Lock()
			if ctx.Err() == nil {
				p.asked++
				if err == nil {
					p.slowest = max(p.slowest, took)
				}
				switch {
				case err != nil && p.since.IsZero():
					p.since, p.lastErr = now, err.Error()
				case err == nil && !p.since.IsZero():
					p.down = append(p.down, span{p.since, now, p.lastErr})
					p.since = time.Time{}
				}
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

// end stops polling and returns the spans the page did not answer (one
// still open counts up to now) and how many times it was asked.
func (p *pagePoller) end() ([]span, int) {
	down, asked, _ := p.endSlowest()
	return down, asked
}

// endSlowest is end, and the longest an answer took.
func (p *pagePoller) endSlowest() ([]span, int, time.Duration) {
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	down := p.down
	if !p.since.IsZero() {
		down = append(down, span{p.since, time.Now(), p.lastErr + " (still down)"})
	}
	return down, p.asked, p.slowest
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Safe changes on the Golem service adapter (issue "Safe changes"), on
// the devnet through the CLI and the adapter images, with the app's page
// polled every 100 ms throughout:
//   - a first plan whose caps admit one provider for the two services of
//     one VPN fails, naming the conflict; nothing is rented;
//   - caps below every offer: plan exits 1 naming the cheapest offer and
//     the cap; deploy refuses before any action; the page answers;
//   - a rebuild (the tutorial's init change) that succeeds: the
//     replacement is agreed before the running rental ends, the page is
//     down only while the new activity starts (the gap is measured);
//   - a rebuild whose new rental fails (every provider rejects the
//     agreement: the devnet's rejectAgreements): the running rental is
//     kept and the page answers throughout; the deploy fails saying so.
//
// On the code before this change, the first two plans exit 0 (the problem
// only inside a cost line) and the rebuilds run delete then create, so the
// page is down from the delete and a failed replacement leaves it down.
func TestSafeChanges(t *testing.T) {
	caps := []string{"vpn", "inet"}
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		// 0.54 GLM/h: 0.18 per env-hour, 0.36 per CPU-hour.
		{Name: "cheap", Count: 1, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: caps, Coeffs: []float64{0.00005, 0.0001, 0}},
		// 1.08 GLM/h: 0.36 per env-hour, 0.72 per CPU-hour.
		{Name: "dear", Count: 3, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: caps, Coeffs: []float64{0.0001, 0.0002, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	write := func(name, text string) string {
		t.Helper()
		f := filepath.Join(e.dir, name)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, name := range []string{"webapp.yaml", "hello.yaml"} {
		src, err := os.ReadFile(filepath.Join(root, "examples", "webapp", name))
		if err != nil {
			t.Fatal(err)
		}
		write(name, string(src))
	}
	webapp := []string{"-f", filepath.Join(e.dir, "webapp.yaml")}
	hello := append(cloneArgs(webapp), "-f", filepath.Join(e.dir, "hello.yaml"))
	// Caps that only the cheap provider meets (0.36 per CPU-hour), for both.
	oneProvider := append(cloneArgs(webapp), "-f", write("one-provider.yaml", `payloads:
  db-server:
    params:
      max_cpu_per_hour: 0.5
  web-server:
    params:
      max_cpu_per_hour: 0.5
`))
	// Caps that no offer meets, for the web service.
	noOffer := append(cloneArgs(webapp), "-f", write("no-offer.yaml", `payloads:
  web-server:
    params:
      max_cpu_per_hour: 0.1
`))

	// 1. Two services on one VPN, one provider within their caps.
	out, err := e.gcompose(ctx, append([]string{"plan"}, oneProvider...)...)
	t.Logf("plan, caps admitting one provider for two services:\n%s", out)
	if exitCode(err) != 1 || !strings.Contains(out, web) || !strings.Contains(out, "need distinct providers") ||
		!strings.Contains(out, "services.db-service takes cheap") {
		t.Fatalf("the plan does not fail naming the conflict (%v):\n%s", err, out)
	}
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 {
		t.Fatalf("the refused plan rented: %+v", s)
	}

	e.must(ctx, append([]string{"deploy", "--yes"}, webapp...)...)
	url := e.field(ctx, proxy, "url")
	if _, err := get(ctx, url); err != nil {
		t.Fatalf("the app does not answer after its deploy: %v", err)
	}

	// 2. Caps below every offer for a service the change rebuilds.
	before := map[string]string{db: e.field(ctx, db, "agreement_id"), web: e.field(ctx, web, "agreement_id")}
	agreements := e.summary(ctx).Agreements
	poll := pollPage(ctx, url)
	out, err = e.gcompose(ctx, append([]string{"plan"}, noOffer...)...)
	t.Logf("plan, caps below every offer:\n%s", out)
	if exitCode(err) != 1 || !strings.Contains(out, web) || !strings.Contains(out, "no offer within the price caps") ||
		!strings.Contains(out, "the cheapest is cheap") && !strings.Contains(out, "the cheapest is dear") || !strings.Contains(out, "max_cpu_per_hour") {
		t.Fatalf("the plan does not fail naming the cheapest offer and the cap (%v):\n%s", err, out)
	}
	out, err = e.gcompose(ctx, append([]string{"deploy", "--yes"}, noOffer...)...)
	t.Logf("deploy, caps below every offer:\n%s", out)
	if exitCode(err) == 0 || !strings.Contains(out, "no offer within the price caps") {
		t.Fatalf("the deploy did not refuse (%v):\n%s", err, out)
	}
	for r, a := range before {
		if now := e.field(ctx, r, "agreement_id"); now != a {
			t.Fatalf("the refused deploy changed %s: agreement %s, now %s\n%s", r, a, now, out)
		}
	}
	if s := e.summary(ctx); s.Agreements != agreements {
		t.Fatalf("the refused deploy changed the rentals: %d agreements, now %+v", agreements, s)
	}
	if down, asked := poll.end(); len(down) > 0 {
		t.Fatalf("the page did not answer during the refused deploy (%d asks): %+v", asked, down)
	} else {
		t.Logf("the page answered all %d asks during the refused plan and deploy", asked)
	}

	// 3. A rebuild that succeeds: the replacement first. The provider takes
	// 3 s to approve: with a warm offer book the whole deploy may otherwise
	// take less than the negotiation the check below needs to tell a
	// replacement rented while the page answered from one rented after it
	// went down.
	const approval = 3 * time.Second
	e.faults(ctx, map[string]any{"approvalDelay": approval.String()})
	poll = pollPage(ctx, url)
	began := time.Now()
	out = e.must(ctx, append([]string{"deploy", "--yes"}, hello...)...)
	took := time.Since(began)
	down, asked, slowest := poll.endSlowest()
	e.faults(ctx, map[string]any{})
	t.Logf("deploy, a rebuild of the web service (%s):\n%s", took, out)
	if now := e.field(ctx, web, "agreement_id"); now == before[web] {
		t.Fatalf("the web service was not rebuilt (agreement %s)", now)
	}
	if now := e.field(ctx, db, "agreement_id"); now != before[db] {
		t.Fatalf("the database was rebuilt too (agreement %s, now %s)", before[db], now)
	}
	m := regexp.MustCompile(`down for ([0-9.]+)(m?s)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "replacement agreed with") {
		t.Fatalf("the deploy does not say the replacement was agreed first and how long the service was down:\n%s", out)
	}
	reported, _ := strconv.ParseFloat(m[1], 64)
	if m[2] == "ms" {
		reported /= 1000
	}
	// Down: a span of failed asks, or an answer that took that long.
	longest := slowest
	for _, s := range down {
		longest = max(longest, s.d())
	}
	t.Logf("rebuild: the page was asked %d times, failed %d time(s), its slowest answer took %.1f s, the longest it was down or held %.1f s; the adapter reports %.1f s from ending the old rental to the new one's init done; the deploy took %.1f s",
		asked, len(down), slowest.Seconds(), longest.Seconds(), reported, took.Seconds())
	if len(down) > 1 {
		t.Errorf("the page went down %d times during one rebuild: %+v", len(down), down)
	}
	// The poller asks every 100 ms.
	if longest.Seconds() > reported+1 {
		t.Errorf("the page was down %.1f s, longer than the adapter's window from ending the old rental to the new one's init done (%.1f s)", longest.Seconds(), reported)
	}
	if longest >= took-approval {
		t.Errorf("the page was down %.1f s of the %.1f s deploy: the negotiation did not happen while it answered", longest.Seconds(), took.Seconds())
	}

	// 4. A rebuild whose new rental fails: every agreement is rejected.
	running := e.field(ctx, web, "agreement_id")
	e.faults(ctx, map[string]any{"rejectAgreements": true})
	poll = pollPage(ctx, url)
	out, err = e.gcompose(ctx, append([]string{"deploy", "--yes"}, webapp...)...)
	down, asked = poll.end()
	e.faults(ctx, map[string]any{})
	t.Logf("deploy, a rebuild whose replacement is refused by every provider:\n%s", out)
	if err == nil || !strings.Contains(out, "no replacement rented, so the running one is kept") {
		t.Fatalf("the deploy does not fail saying the running service is kept (%v):\n%s", err, out)
	}
	if now := e.field(ctx, web, "agreement_id"); now != running {
		t.Fatalf("the failed rebuild changed the web service's agreement %s to %s", running, now)
	}
	if a, err := e.yc.GetAgreement(ctx, running); err != nil || a.State != yagna.AgreementApproved {
		t.Fatalf("after the failed rebuild the running agreement %s is %s (%v)", running, a.State, err)
	}
	if len(down) > 0 {
		t.Fatalf("the page did not answer during the failed rebuild (%d asks): %+v", asked, down)
	}
	t.Logf("the page answered all %d asks during the failed rebuild", asked)
	// ps names the provider that still runs it.
	ps := exec.CommandContext(ctx, e.bin, "ps", "--app", e.app, "--state", e.state)
	ps.Dir, ps.Env = e.dir, append(os.Environ(), "YAGNA_API_URL="+e.url, "YAGNA_APPKEY="+appKey, "XDG_CACHE_HOME="+filepath.Join(e.dir, "cache"))
	psOut, err := ps.CombinedOutput()
	t.Logf("ps after the failed rebuild:\n%s", psOut)
	if err != nil || !regexp.MustCompile(regexp.QuoteMeta(web)+`\s.*`+regexp.QuoteMeta(e.field(ctx, web, "provider_name"))).Match(psOut) {
		t.Fatalf("ps does not show the web service on the provider that runs it (%v):\n%s", err, psOut)
	}
	e.must(ctx, append([]string{"destroy", "--yes"}, webapp...)...)
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

func cloneArgs(s []string) []string { return append([]string(nil), s...) }
