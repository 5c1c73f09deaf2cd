package longlived

// The two ends of a long-lived container that the payments and proxy
// adapters share: the adapter call that (re)starts it (Replace), and the
// image's main that runs it (Main, Connect).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Replace starts the long-lived container of the request's resource anew:
// it asks the request's yagna which node it is (Node), removes the
// container the resource had in the app's state (Remove), and starts s in
// its place (Start) under the request's resource name, adapter image,
// lineage and operation, waiting up to wait for it. who begins the errors
// of the node and of the start ("payments app1", "proxy of web"); started
// says what failed to start, after who ("" says nothing more).
func Replace(ctx context.Context, req *sdk.Request, who, started string, s Spec, wait time.Duration) (string, error) {
	yc, err := network.Client(req)
	if err != nil {
		return "", err
	}
	node, err := Node(ctx, yc)
	if err != nil {
		return "", fmt.Errorf("%s: %w", who, err)
	}
	d, err := Docker()
	if err != nil {
		return "", err
	}
	defer d.Close()
	if err := Remove(ctx, d, s.App, req.Lineage(), req.Name); err != nil {
		return "", err
	}
	s.Resource, s.Image, s.Lineage, s.Operation, s.Node = req.Name, req.Type, req.Lineage(), OperationID(req), node
	id, err := Start(ctx, d, s, wait)
	if err != nil {
		if started != "" {
			return "", fmt.Errorf("%s: %s: %w", who, started, err)
		}
		return "", fmt.Errorf("%s: %w", who, err)
	}
	return id, nil
}

// OperationID is the id of the operation the request is part of, "" if
// none: what LabelOperation holds.
func OperationID(req *sdk.Request) string {
	if o := req.Operation(); o != nil {
		return o.ID
	}
	return ""
}

// Main is the main of an adapter image that is also its own long-lived
// container: run with arg as its first argument it is the container (run
// gets the other arguments, the secrets on stdin, and a context that ends
// on SIGTERM or an interrupt, and its result is the exit status);
// otherwise it is the adapter a.
func Main(arg string, run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int, a sdk.Adapter) {
	if len(os.Args) > 1 && os.Args[1] == arg {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := run(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	sdk.Main(a)
}

// Connect is the container's side of Start: it reads the secrets Start
// wrote on stdin (ReadSecrets) and connects to yagna with them (the same
// variables as the adapter's call: YAGNA_API_URL, YAGNA_APPKEY). What
// fails is logged on log and returned.
func Connect(stdin io.Reader, log *slog.Logger) (*yagna.Client, error) {
	secrets, err := ReadSecrets(stdin)
	if err != nil {
		log.Error("no secrets", "err", err)
		return nil, err
	}
	yc, err := yagna.FromEnvFunc(func(k string) string { return secrets[k] })
	if err != nil {
		log.Error("yagna connection", "err", err)
		return nil, err
	}
	return yc, nil
}
