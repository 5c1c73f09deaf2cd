package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// WarnLogger is a logger for Options.Logger (and the adapter client's) that
// hands every warning or error to warn as one line, "message (key=value,
// ...)", and drops debug and info records. A command-line tool passes what
// prints its warnings, so that nothing the runner warns about (a container
// the engine would not remove, limits it ignores) is lost; with warn nil,
// they go to slog.Default().
func WarnLogger(warn func(msg string)) *slog.Logger {
	if warn == nil {
		warn = func(msg string) { slog.Default().Warn(msg) }
	}
	return slog.New(&warnHandler{warn: warn})
}

type warnHandler struct {
	warn  func(string)
	attrs []string // key=value of With, with the group they were given in
	group string   // "a.b." of WithGroup
}

func (h *warnHandler) format(a slog.Attr) (string, bool) {
	if a.Equal(slog.Attr{}) {
		return "", false
	}
	return fmt.Sprintf("%s%s=%v", h.group, a.Key, a.Value.Resolve()), true
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn
}

func (h *warnHandler) Handle(_ context.Context, rec slog.Record) error {
	kv := append([]string(nil), h.attrs...)
	rec.Attrs(func(a slog.Attr) bool {
		if s, ok := h.format(a); ok {
			kv = append(kv, s)
		}
		return true
	})
	msg := rec.Message
	if len(kv) > 0 {
		msg += " (" + strings.Join(kv, ", ") + ")"
	}
	h.warn(msg)
	return nil
}

func (h *warnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]string(nil), h.attrs...)
	for _, a := range attrs {
		if s, ok := h.format(a); ok {
			c.attrs = append(c.attrs, s)
		}
	}
	return &c
}

func (h *warnHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group = h.group + name + "."
	return &c
}
