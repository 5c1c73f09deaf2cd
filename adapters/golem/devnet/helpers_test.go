package devnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/devnet/devnettest"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/testimage"
)

const testKey = "test-app-key-0123456789"

// testHash is the golem.image.hash the test build of the devnet-db image carries.
const testHash = "e059865e432cf052f886b2c85601efe74b783eb7fc9d886896fb871f"

type env struct {
	t        testing.TB
	srv      *devnet.Server
	url      string
	c        *yagna.Client
	docker   *client.Client
	instance string
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// start runs a devnet on a real loopback listener, checked against the OpenAPI files; when the test
// ends it is closed and the test checks that no labelled container or network is left.
func start(t testing.TB, cfg devnet.Config) *env {
	t.Helper()
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	instance := "test-" + strings.ToLower(unsafeChars.ReplaceAllString(t.Name(), "-"))
	cfg.Instance = instance
	cfg.Labels = testimage.Labels(t)
	// testHash is this checkout's provider image, not the newest image carrying the label, which
	// may be another checkout's build. Without busybox there is none to build: the tests that rent
	// testHash skip in buildProviderImage.
	if _, mapped := cfg.Images[testHash]; !mapped && haveBusybox() {
		images := map[string]string{testHash: buildProviderImage(t, docker)}
		for h, ref := range cfg.Images {
			images[h] = ref
		}
		cfg.Images = images
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := devnet.New(ctx, devnet.Options{Config: cfg, AppKey: testKey, Docker: docker, Logger: log, Init: devnettest.Init(t)})
	if err != nil {
		t.Fatalf("devnet.New: %v", err)
	}
	url := devnettest.Serve(t, docker, srv, instance, nil)
	return &env{t: t, srv: srv, url: url, c: yagna.New(url, testKey), docker: docker, instance: instance}
}

// raw sends a request with the given key ("" for none) and returns status and body.
func (e *env) raw(method, path, key string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// buildProviderImage builds images/devnet-db.Dockerfile (busybox, devnet-init, devnet-db) named
// gcompose/devnet-db:test, labelled with testHash, and returns its reference (the name with the
// content's hash: another checkout's image of the name may differ).
func buildProviderImage(t testing.TB, _ *client.Client) string {
	t.Helper()
	return devnettest.DemoImage(t, ctxT(t, 5*time.Minute), "devnet-db", "gcompose/devnet-db:test", map[string]string{devnet.LabelImageHash: testHash})
}

// haveBusybox says whether the provider images can be built (devnettest.DemoImage).
func haveBusybox() bool {
	_, err := os.Stat("/bin/busybox")
	return err == nil
}

// buildWebImage builds images/devnet-web.Dockerfile named gcompose/devnet-web:test and returns
// its reference.
func buildWebImage(t testing.TB, _ *client.Client) string {
	t.Helper()
	return devnettest.DemoImage(t, ctxT(t, 5*time.Minute), "devnet-web", "gcompose/devnet-web:test", map[string]string{devnet.LabelImageHash: "0000000000000000000000000000000000000000000000000000test"})
}

// negotiated is the result of the market phase.
type negotiated struct {
	alloc      yagna.Allocation
	demandID   string
	agreement  string
	providerID string
}

// rent allocates, subscribes a demand for the given task package, negotiates with the first matching
// provider that has the vpn capability and gets an approved agreement.
func (e *env) rent(ctx context.Context, taskPackage string) negotiated {
	e.t.Helper()
	return e.rentWhere(ctx, taskPackage, "(golem.runtime.capabilities=vpn)")
}

// rentWhere is rent with another constraint than the vpn capability.
func (e *env) rentWhere(ctx context.Context, taskPackage, where string) negotiated {
	e.t.Helper()
	t := e.t
	alloc, err := e.c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "10", PaymentPlatform: &yagna.PaymentPlatform{Name: funded}})
	if err != nil {
		t.Fatalf("CreateAllocation: %v", err)
	}
	dec, err := e.c.DemandDecorations(ctx, alloc.AllocationID)
	if err != nil {
		t.Fatalf("DemandDecorations: %v", err)
	}
	props := validDemand(map[string]any{
		"golem.srv.comp.task_package":      taskPackage,
		"golem.node.debug.subnet":          "public",
		"golem.srv.comp.vm.package_format": "gvmkit-squash",
	})
	for _, p := range dec.Properties {
		props[p.Key] = p.Value
	}
	cons := "(&" + strings.Join(append([]string{"(golem.runtime.name=vm)", where}, dec.Constraints...), "") + ")"
	sub, err := e.c.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: props, Constraints: cons})
	if err != nil {
		t.Fatalf("SubscribeDemand: %v", err)
	}
	t.Cleanup(func() { _ = e.c.UnsubscribeDemand(context.Background(), sub) })
	evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
	if err != nil || len(evs) == 0 || evs[0].Proposal == nil {
		t.Fatalf("CollectOffers: %v %+v", err, evs)
	}
	initial := evs[0].Proposal
	// The deadline the provider proposes is the longest it takes.
	props["golem.com.payment.debit-notes.accept-timeout?"] = initial.Properties["golem.com.payment.debit-notes.accept-timeout?"]
	counter, err := e.c.CounterProposal(ctx, sub, initial.ProposalID, yagna.DemandOfferBase{Properties: props, Constraints: cons})
	if err != nil {
		t.Fatalf("CounterProposal: %v", err)
	}
	var draft *yagna.Proposal
	for draft == nil {
		evs, err := e.c.CollectOffers(ctx, sub, 2*time.Second, 10)
		if err != nil {
			t.Fatalf("CollectOffers: %v", err)
		}
		for _, ev := range evs {
			if ev.Proposal != nil && ev.Proposal.PrevProposalID == counter {
				draft = ev.Proposal
			}
		}
	}
	ag, err := e.c.CreateAgreement(ctx, draft.ProposalID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatalf("CreateAgreement: %v", err)
	}
	if err := e.c.ConfirmAgreement(ctx, ag, ""); err != nil {
		t.Fatalf("ConfirmAgreement: %v", err)
	}
	if err := e.c.WaitForApproval(ctx, ag, 5*time.Second); err != nil {
		t.Fatalf("WaitForApproval: %v", err)
	}
	return negotiated{alloc: alloc, demandID: sub, agreement: ag, providerID: draft.IssuerID}
}

// funded is the platform of the devnet's default funded account (what `yagna payment fund` funds).
const funded = "erc20-hoodi-tglm"

// validDemand adds to props what a provider with the devnet's default settings requires of a demand
// and takes: an expiration an hour away, the debit-note acceptance deadline its offer proposes (4 min)
// and the chosen platform.
func validDemand(props map[string]any) map[string]any {
	props["golem.srv.comp.expiration"] = time.Now().Add(time.Hour).UnixMilli()
	props["golem.com.payment.debit-notes.accept-timeout?"] = 240
	props["golem.com.payment.chosen-platform"] = funded
	return props
}

func taskPackage(hash string) string {
	return fmt.Sprintf("hash:sha3:%s:http://registry.invalid/%s.gvmi", hash, hash[:8])
}
