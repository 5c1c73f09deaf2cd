package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/protocol"
)

// TestPlanContractOnTheDevnet is issue 12's proof on the devnet, with the
// real adapter images over HTTP, on one deployed examples/webapp:
//   - a reference to an output the payments adapter does not declare fails
//     the first plan, before anything is rented;
//   - the deploy prints the app's outputs (its URL), gcompose output url
//     prints it alone, and every state the adapters report matches the
//     outputs they declare;
//   - a change of a protected db's init is refused, naming why, and nothing
//     changes; --replace of it is refused too while it is protected;
//   - once unprotected, --replace services.db-service rebuilds it (a new
//     agreement at its planned address) and nothing else;
//   - deploy web-service rebuilds web and touches none of what it does not
//     need: the change of its proxy waits for the next full deploy.
func TestPlanContractOnTheDevnet(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", "webapp", "webapp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	webapp := string(src)
	edit := func(s, old, new string) string {
		t.Helper()
		if !strings.Contains(s, old) {
			t.Fatalf("the descriptor has no %q", old)
		}
		return strings.Replace(s, old, new, 1)
	}
	protected := edit(webapp, "    payload: db-server\n", "    payload: db-server\n    protect: true\n")
	desc := filepath.Join(e.dir, "webapp.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(desc, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fails := func(what string, want ...string) string {
		t.Helper()
		out, err := e.gcompose(ctx, append(strings.Fields(what), "-f", desc)...)
		if err == nil {
			t.Fatalf("gcompose %s succeeded:\n%s", what, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("gcompose %s does not say %q:\n%s", what, w, out)
			}
		}
		if i := strings.Index(out, "Error:"); i >= 0 {
			t.Logf("gcompose %s: %s", what, out[i:])
		}
		return out
	}

	t.Log("an undeclared output fails the first plan")
	write(edit(protected, "outputs:\n", "outputs:\n  spent: ${resources.golem-payments.state.spent}\n"))
	fails("plan", "resources.golem-payments will not report spent: its adapter declares the outputs allocation_id, budget, keeper, platform, state")
	if s := e.summary(ctx); s.Agreements != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Fatalf("a refused plan rented something: %+v", s)
	}

	t.Log("deploy prints the outputs")
	write(protected)
	out := e.must(ctx, "deploy", "-f", desc, "--yes")
	url := e.field(ctx, proxy, "url")
	if !strings.Contains(out, "\nOutputs:\n") || !strings.Contains(out, "  url        = "+url+"\n") ||
		!strings.Contains(out, "  db_address = "+e.field(ctx, db, "ip")+"\n") {
		t.Fatalf("the deploy does not end with the outputs (url %s):\n%s", url, out)
	}
	if got := e.output(ctx, "-f", desc, "url"); got != url {
		t.Fatalf("gcompose output url printed %q, want %q", got, url)
	}
	if page, err := get(ctx, url); err != nil || !strings.Contains(page, "records read back from the database") {
		t.Fatalf("the output url %s does not serve the app: %v\n%s", url, err, page)
	}
	e.statesMatchTheirDeclarations(ctx)

	t.Log("a protected db is not rebuilt")
	dbAgreement, webAgreement, proxyContainer := e.field(ctx, db, "agreement_id"), e.field(ctx, web, "agreement_id"), e.field(ctx, proxy, "container")
	write(edit(protected, "/tmp/db.err &\"]\n", "/tmp/db.err &\"]\n      - run:\n          args: [\"/bin/sh\", \"-c\", \"echo changed\"]\n"))
	fails("deploy --yes", db+" is protected (protect: true at ", "this plan would rebuild it (changed: /init", "remove protect: true to allow that")
	write(protected)
	fails("plan --replace "+db, db+" is protected", "replacement asked (--replace)")
	if e.field(ctx, db, "agreement_id") != dbAgreement || e.field(ctx, web, "agreement_id") != webAgreement {
		t.Fatal("the refused deploy changed the services")
	}

	t.Log("--replace rebuilds the unprotected db, and only it")
	write(webapp)
	dbIP := e.field(ctx, db, "ip")
	e.must(ctx, "deploy", "-f", desc, "--replace", db, "--yes")
	if e.field(ctx, db, "agreement_id") == dbAgreement {
		t.Fatal("--replace did not rebuild the db")
	}
	if e.field(ctx, db, "ip") != dbIP {
		t.Fatalf("the replaced db moved from its planned address %s to %s", dbIP, e.field(ctx, db, "ip"))
	}
	if e.field(ctx, web, "agreement_id") != webAgreement || e.field(ctx, proxy, "container") != proxyContainer {
		t.Fatal("--replace of the db rebuilt web or its proxy, which only read the db's unchanged address")
	}

	t.Log("deploy web-service touches web and what it needs, not its proxy")
	// Both web (its init) and its proxy (one more port) change; the proxy
	// depends on web, web does not need it.
	changed := edit(webapp, "run > /tmp/web.out 2> /tmp/web.err &\"]\n", "run > /tmp/web.out 2> /tmp/web.err &\"]\n      - run:\n          args: [\"/bin/sh\", \"-c\", \"echo targeted\"]\n")
	write(edit(changed, "        - \"80\"\n", "        - \"80\"\n        - \"81\"\n"))
	dbAgreement = e.field(ctx, db, "agreement_id")
	e.must(ctx, "deploy", "-f", desc, "web-service", "--yes")
	if e.field(ctx, web, "agreement_id") == webAgreement {
		t.Fatal("deploy web-service did not rebuild web")
	}
	if e.field(ctx, db, "agreement_id") != dbAgreement || e.field(ctx, proxy, "container") != proxyContainer {
		t.Fatal("deploy web-service touched the db or the proxy")
	}
	if ops := e.planOps(ctx, desc); ops[proxy] != "rebuild" || ops[web] != "noop" || ops[db] != "noop" {
		t.Fatalf("after deploy web-service the full plan is %v; want only the proxy left to rebuild", ops)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

// output is gcompose output of the app (which takes no adapter flags).
func (e *env) output(ctx context.Context, args ...string) string {
	e.t.Helper()
	cmd := exec.CommandContext(ctx, e.bin, append([]string{"output", "--app", e.app, "--state", e.state}, args...)...)
	cmd.Dir = e.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("gcompose output %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// statesMatchTheirDeclarations checks every resource's recorded state
// against the outputs schema its adapter's init answer declares.
func (e *env) statesMatchTheirDeclarations(ctx context.Context) {
	e.t.Helper()
	v, err := protocol.NewValidator()
	if err != nil {
		e.t.Fatal(err)
	}
	roles := map[string]string{vpn: "network", pay: "payments", db: "service", web: "service", proxy: "proxy"}
	adapters := golemAdapters()
	for res, role := range roles {
		schema, err := json.Marshal(declaredOutputs(e.t, adapters[role]))
		if err != nil {
			e.t.Fatal(err)
		}
		st, _ := e.stateOf(ctx, res)["state"].(map[string]any)
		if err := v.ValidateConfig(schema, st); err != nil {
			e.t.Errorf("%s reports a state its adapter (golem-%s) does not declare: %v\n%v", res, role, err, st)
		}
	}
}
