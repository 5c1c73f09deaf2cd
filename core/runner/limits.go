package runner

import (
	"context"
	"strings"

	"github.com/docker/docker/api/types/container"
)

// checkLimits compares, once per Runner, the limits the engine recorded for
// the first container created with those asked for, and warns when it
// dropped some: the container still runs, with the engine's own limits.
// Rootless Podman ignores ulimits given through the Docker API, and on
// cgroups v1 also every memory, CPU and process limit.
func (r *Runner) checkLimits(ctx context.Context, id string, asked *container.HostConfig) {
	r.limitsOnce.Do(func() {
		ins, err := r.inspect(ctx, id)
		if err != nil || ins.ContainerJSONBase == nil || ins.HostConfig == nil {
			r.log.Debug("limits not checked", "container", id, "err", err)
			return
		}
		if dropped := droppedLimits(asked.Resources, ins.HostConfig.Resources); len(dropped) > 0 {
			r.log.Warn("the engine does not apply the limits gcompose sets on adapter containers; adapters run with the engine's own (docs/engines.md)",
				"engine", r.cli.DaemonHost(), "dropped", strings.Join(dropped, ", "))
		}
	})
}

// droppedLimits names the limits asked for that got does not hold.
func droppedLimits(asked, got container.Resources) []string {
	var dropped []string
	if asked.Memory > 0 && got.Memory != asked.Memory {
		dropped = append(dropped, "memory")
	}
	if asked.NanoCPUs > 0 && got.NanoCPUs != asked.NanoCPUs {
		dropped = append(dropped, "CPUs")
	}
	if asked.PidsLimit != nil && (got.PidsLimit == nil || *got.PidsLimit != *asked.PidsLimit) {
		dropped = append(dropped, "PIDs")
	}
	have := map[string]container.Ulimit{}
	for _, u := range got.Ulimits {
		if u != nil {
			// Podman says RLIMIT_NOFILE where Docker says nofile.
			have[strings.TrimPrefix(strings.ToLower(u.Name), "rlimit_")] = *u
		}
	}
	for _, u := range asked.Ulimits {
		if h, ok := have[u.Name]; !ok || h.Soft != u.Soft || h.Hard != u.Hard {
			dropped = append(dropped, u.Name+" ulimit")
		}
	}
	return dropped
}
