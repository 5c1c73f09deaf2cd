// Command devnet runs a local yagna-compatible daemon whose providers are Docker containers.
//
//	devnet -listen 127.0.0.1:7465 -config devnet.yaml     # app key from YAGNA_APPKEY
//
// The app key comes from -appkey-file, or the YAGNA_APPKEY environment variable, or -appkey (visible in
// process lists: avoid). It is never logged. SIGTERM or SIGINT stop the devnet and remove every container
// and network it created.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/enginecall"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devnet:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", envOr("DEVNET_LISTEN", "127.0.0.1:7465"), "address to serve the yagna REST API on")
	configPath := flag.String("config", os.Getenv("DEVNET_CONFIG"), "devnet configuration file (YAML); empty: defaults")
	appKey := flag.String("appkey", "", "application key (prefer YAGNA_APPKEY or -appkey-file: flags show in process lists)")
	appKeyFile := flag.String("appkey-file", "", "file holding the application key")
	instance := flag.String("instance", os.Getenv("DEVNET_INSTANCE"), "instance name (label gcompose.devnet=<instance>); overrides the config")
	self := flag.String("self-container", envOr("DEVNET_SELF_CONTAINER", "auto"), "container the devnet runs in (the payload containers mount its volume that holds -vpn-dir): auto, none, or an id/name")
	vpnDir := flag.String("vpn-dir", os.Getenv("DEVNET_VPN_DIR"), "directory of the VPN relay's unix socket, which every payload container on a VPN mounts; empty: "+devnet.DefaultVPNDir+" in a container (a volume of it), a temporary directory on the host")
	engineTimeout := flag.Duration("engine-timeout", enginecall.DefaultBound, "how long the Docker Engine may take to answer one call before the devnet takes it for hung and fails the request that needed it")
	initBin := flag.String("init", os.Getenv("DEVNET_INIT"), "the static devnet-init binary put into every payload container (its PID 1 and VPN join); empty: devnet-init beside this executable, then /devnet-init")
	checkConfig := flag.Bool("check-config", false, "check the -config file and exit: 0 when a devnet could start with it")
	flag.Parse()
	if *checkConfig {
		if *configPath == "" {
			return fmt.Errorf("-check-config needs -config FILE")
		}
		cfg, err := devnet.LoadConfig(*configPath)
		if err == nil {
			err = cfg.Check()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", *configPath, err)
		}
		return nil
	}
	if *engineTimeout <= 0 {
		return fmt.Errorf("-engine-timeout %s: want a duration above zero, such as 2m", *engineTimeout)
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	key, err := resolveKey(*appKey, *appKeyFile)
	if err != nil {
		return err
	}
	cfg := devnet.Config{}
	if *configPath != "" {
		if cfg, err = devnet.LoadConfig(*configPath); err != nil {
			return err
		}
	}
	if *instance != "" {
		cfg.Instance = *instance
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker engine client: %w", err)
	}
	defer docker.Close()
	selfID := detectSelf(ctx, docker, *self, *engineTimeout, log)

	srv, err := devnet.New(ctx, devnet.Options{Config: cfg, AppKey: key, Docker: docker, Logger: log, SelfContainer: selfID, VPNDir: *vpnDir, EngineTimeout: *engineTimeout, Init: *initBin})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_ = srv.Close(context.Background())
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Info("devnet serving the yagna API", "addr", ln.Addr().String(), "identity", srv.Identity())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info("stopping devnet")
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if cerr := srv.Close(sctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("devnet stopped; its containers and networks are removed")
	return err
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func resolveKey(flagKey, file string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading app key file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	case os.Getenv("YAGNA_APPKEY") != "":
		return os.Getenv("YAGNA_APPKEY"), nil
	case flagKey != "":
		return flagKey, nil
	}
	return "", errors.New("no app key: set YAGNA_APPKEY, -appkey-file or -appkey")
}

// detectSelf finds the container the devnet runs in: with "auto", the hostname when /.dockerenv exists.
func detectSelf(ctx context.Context, docker *client.Client, want string, bound time.Duration, log *slog.Logger) string {
	switch want {
	case "none", "":
		return ""
	case "auto":
		if _, err := os.Stat("/.dockerenv"); err != nil {
			return ""
		}
		h, err := os.Hostname()
		if err != nil {
			return ""
		}
		want = h
	}
	c, err := enginecall.Get(ctx, docker.DaemonHost(), "ContainerInspect", want, bound, func(ctx context.Context) (container.InspectResponse, error) {
		return docker.ContainerInspect(ctx, want)
	})
	if err != nil {
		log.Warn("cannot find the devnet's own container: the payload containers will bind-mount the VPN directory as a host path", "container", want, "err", err)
		return ""
	}
	return c.ID
}
