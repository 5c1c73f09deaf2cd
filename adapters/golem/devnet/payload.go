package devnet

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
)

// A payload container runs any image, as a provider's VM does (ya-runtime-vm converts the image, it does
// not need anything in it): the image needs no shell, no `ip`, no init.
//
// The devnet copies its own static binary devnet-init (cmd/devnet-init) into every payload container at
// initPath before the start, and runs it as the container's PID 1 in place of the image's entrypoint. It
// keeps the container alive until the activity ends, as the VM is, and reaps what an ExeScript `run`
// leaves in the background. The image's ENTRYPOINT and CMD run only when the start command asks for them
// with the argument start-entrypoint, on a provider that advertises the capability, as ya-runtime-vm does
// (runtime/src/lib.rs: start runs extract_entrypoint's entrypoint+cmd only when the start command's args
// contain "start-entrypoint"; offer lists the runtime capabilities inet, vpn, manifest-support and
// start-entrypoint).
//
// The VPN join runs the same binary (devnet-init vpn, vpnrelay.go) as root in the container's network
// namespace: it makes the TUN devices through netlink itself and relays their packets. This works wherever
// the devnet runs (in its compose container, in-process in tests, on the host) and on Podman, since it
// takes only the Engine API's copy and exec and the socket directory's mount: a helper container in the
// payload's network namespace (NetworkMode container:<id>) would also need its own image on the engine and
// a container per join, and a setns from the devnet's process works only when the devnet runs as root in
// the host's PID namespace, which its compose container does not.
const initPath = "/.devnet-init"

// startEntrypoint is the start command's argument, and the runtime capability, of a start that runs the
// image's entrypoint (ya-runtime-vm runtime/src/lib.rs).
const startEntrypoint = "start-entrypoint"

// loadInit reads the devnet-init binary at path (default: devnet-init beside the devnet's executable, then
// /devnet-init, where images/devnet.Dockerfile puts it): the binary (initshare.go) and its archive for
// CopyToContainer.
func loadInit(path string) (bin, archive []byte, err error) {
	if path == "" {
		var tried []string
		if exe, err := os.Executable(); err == nil {
			tried = append(tried, filepath.Join(filepath.Dir(exe), "devnet-init"))
		}
		tried = append(tried, "/devnet-init")
		for _, p := range tried {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			return nil, nil, fmt.Errorf("no devnet-init binary (the payload containers' PID 1 and VPN join) at %s: build it (make) or name it (Options.Init, devnet -init PATH)", strings.Join(tried, " or "))
		}
	}
	bin, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading devnet-init (the payload containers' PID 1 and VPN join): %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(initPath, "/"), Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return nil, nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	return bin, buf.Bytes(), nil
}

// payloadConfig makes cfg run devnet-init as PID 1 and returns the image's entrypoint and command, which
// start runs when asked to (start-entrypoint).
func (s *Server) payloadConfig(ctx context.Context, cfg *container.Config) ([]string, error) {
	if s.initErr != nil {
		return nil, s.initErr
	}
	// An image ID names its content, so its entrypoint is asked once; a name (the config's images map)
	// may move to another image, so it is asked each time.
	byID := strings.HasPrefix(cfg.Image, "sha256:")
	s.lookupMu.Lock()
	entry, known := s.entrypoints[cfg.Image]
	s.lookupMu.Unlock()
	if !known || !byID {
		insp, err := s.docker.ImageInspect(ctx, cfg.Image)
		if err != nil {
			return nil, fmt.Errorf("inspecting image %s: %w", cfg.Image, err)
		}
		entry = []string{}
		if insp.Config != nil {
			entry = append(slices.Clone(insp.Config.Entrypoint), insp.Config.Cmd...)
		}
		if byID {
			s.lookupMu.Lock()
			s.entrypoints[cfg.Image] = entry
			s.lookupMu.Unlock()
		}
	}
	cfg.Entrypoint, cfg.Cmd = []string{s.initCmd()}, nil
	return slices.Clone(entry), nil
}

// injectInit copies devnet-init into the created payload container, unless it runs it from the relay's
// directory (initshare.go).
func (s *Server) injectInit(ctx context.Context, id string) error {
	if s.initShared != "" {
		return nil
	}
	if err := s.docker.CopyToContainer(ctx, id, "/", bytes.NewReader(s.initTar), container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copying devnet-init (its PID 1) into container %s: %w", short(id), err)
	}
	return nil
}

// startArgs reads the start command's args ({"args": [...]}; ya-client model/activity/exe_script_command.rs
// ExeScriptCommand::Start). A start without a body has none.
func startArgs(arg json.RawMessage) ([]string, error) {
	var body struct {
		Args []string `json:"args"`
	}
	if len(arg) == 0 || string(arg) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(arg, &body); err != nil {
		return nil, fmt.Errorf("start: args: %w", err)
	}
	return body.Args, nil
}

// runEntrypoint starts the image's entrypoint in the background when the start command's args ask for it
// and the provider advertises start-entrypoint. A runtime without the capability does not read the
// argument (ya-runtime-vm before it), so elsewhere it is ignored, as the vpn of a provider without vpn.
func (s *Server) runEntrypoint(ctx context.Context, act *activity, args []string) error {
	if !slices.Contains(args, startEntrypoint) {
		return nil
	}
	s.mu.Lock()
	var caps []string
	provider := ""
	if a := s.agreements[act.agreementID]; a != nil {
		caps, provider = a.provider.cfg.Capabilities, a.provider.name
	}
	relax := s.cfg.Relax.Capabilities
	entry := slices.Clone(act.entrypoint)
	id := act.containerID
	s.mu.Unlock()
	if !relax && !slices.Contains(caps, startEntrypoint) {
		s.log.Info("start: provider has no start-entrypoint capability, the image's entrypoint is not run", "provider", provider, "activity", act.id)
		return nil
	}
	if len(entry) == 0 {
		// ya-runtime-vm's words (runtime/src/lib.rs start).
		return errors.New("'start_entrypoint' flag is set but the container does not define an entrypoint!")
	}
	ex, err := s.docker.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: entry, Detach: true})
	if err != nil {
		return fmt.Errorf("starting the image's entrypoint %q: %w", entry, err)
	}
	if err := s.docker.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("starting the image's entrypoint %q: %w", entry, err)
	}
	s.log.Info("start: the image's entrypoint runs", "activity", act.id, "entrypoint", entry)
	return nil
}

func (e *engine) CopyToContainer(ctx context.Context, id, dst string, content *bytes.Reader, o container.CopyToContainerOptions) error {
	return call(ctx, e, "CopyToContainer", short(id), func(ctx context.Context) error {
		_, _ = content.Seek(0, 0)
		return e.cli.CopyToContainer(ctx, id, dst, content, o)
	})
}

func (e *engine) ContainerExecStart(ctx context.Context, execID string, o container.ExecStartOptions) error {
	return call(ctx, e, "ContainerExecStart", short(execID), func(ctx context.Context) error {
		return e.cli.ContainerExecStart(ctx, execID, o)
	})
}
