package runner

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// errStdoutLimit is returned by the stdout sink when an adapter writes more
// than the allowed number of bytes; the copy stops and the container is killed.
var errStdoutLimit = errors.New("stdout limit exceeded")

// limitedBuffer collects stdout up to a limit.
type limitedBuffer struct {
	buf   bytes.Buffer
	limit int64
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if int64(b.buf.Len())+int64(len(p)) > b.limit {
		return 0, errStdoutLimit
	}
	return b.buf.Write(p)
}

// stdoutLines collects stdout like limitedBuffer and also hands every
// complete line to fn as soon as it is written, so that what an adapter
// reports while it runs (identity lines) is known before it exits.
type stdoutLines struct {
	buf     *limitedBuffer
	fn      func(line []byte)
	partial []byte
}

func (s *stdoutLines) Write(p []byte) (int, error) {
	n, err := s.buf.Write(p)
	if err != nil {
		return n, err
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			break
		}
		line := p[:i]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
			s.partial = s.partial[:0]
		}
		s.fn(bytes.TrimRight(line, "\r"))
		p = p[i+1:]
	}
	return n, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String returns the tail, cut at a line start when it was truncated and
// stripped of invalid UTF-8 at the cut.
func (t *tail) String() string {
	b := t.buf
	if len(b) == t.max {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
		for len(b) > 0 && !utf8.FullRune(b) {
			b = b[1:]
		}
		for len(b) > 0 {
			r, size := utf8.DecodeRune(b)
			if r != utf8.RuneError || size > 1 {
				break
			}
			b = b[1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}

// maxLine is the longest stderr line forwarded in one piece; longer lines are
// split so that a chatty adapter cannot make gcompose buffer without bound.
const maxLine = 16 << 10

// lineWriter forwards stderr to w line by line, each line prefixed, in one
// Write per line so lines of concurrent calls do not interleave mid-line
// (w must be safe for concurrent use if it is shared). It also feeds the tail.
type lineWriter struct {
	w      io.Writer
	prefix string
	line   []byte
	tail   *tail
	err    error // first error of w; forwarding stops, the tail goes on
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	l.tail.Write(p)
	if l.w == nil || l.err != nil {
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.line = append(l.line, p...)
			if len(l.line) >= maxLine {
				l.emit()
			}
			return n, nil
		}
		l.line = append(l.line, p[:i]...)
		l.emit()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineWriter) emit() {
	if l.err != nil {
		l.line = l.line[:0]
		return
	}
	out := make([]byte, 0, len(l.prefix)+len(l.line)+1)
	out = append(out, l.prefix...)
	out = append(out, bytes.TrimRight(l.line, "\r")...)
	out = append(out, '\n')
	if _, err := l.w.Write(out); err != nil {
		l.err = err
	}
	l.line = l.line[:0]
}

// flush emits a last line that had no newline.
func (l *lineWriter) flush() {
	if l.w != nil && len(l.line) > 0 {
		l.emit()
	}
}

// FormatTail renders a stderr tail for an error message: indented, or a note
// that the adapter wrote nothing to stderr.
func FormatTail(tail string) string {
	if strings.TrimSpace(tail) == "" {
		return "(stderr was empty)"
	}
	var sb strings.Builder
	sb.WriteString("stderr tail:")
	for _, line := range strings.Split(tail, "\n") {
		sb.WriteString("\n    ")
		sb.WriteString(line)
	}
	return sb.String()
}
