package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// IdentityLine formats identifying attributes as one line of action stdout
// (IdentityPrefix, compact JSON, newline).
func IdentityLine(identity map[string]any) (string, error) {
	raw, err := json.Marshal(identity)
	if err != nil {
		return "", fmt.Errorf("identity line: %w", err)
	}
	return IdentityPrefix + string(raw) + "\n", nil
}

// ParseIdentityLines splits an action's stdout into the free text shown to the
// user and the identifying attributes reported on lines starting with
// IdentityPrefix (merged in order: a later line overrides a key of an earlier
// one). A malformed identity line is kept out of both and reported in err;
// text and identity still hold everything else. identity is nil when no line
// reported any.
func ParseIdentityLines(stdout []byte) (text string, identity map[string]any, err error) {
	var out strings.Builder
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	sc.Buffer(make([]byte, 64*1024), len(stdout)+1)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, IdentityPrefix)
		if !ok {
			out.WriteString(line)
			out.WriteByte('\n')
			continue
		}
		var m map[string]any
		if e := json.Unmarshal([]byte(rest), &m); e != nil || m == nil {
			if e == nil {
				e = errors.New("want a JSON object")
			}
			errs = append(errs, fmt.Errorf("stdout line %d: identity: %w", n, e))
			continue
		}
		if identity == nil {
			identity = map[string]any{}
		}
		maps.Copy(identity, m)
	}
	if e := sc.Err(); e != nil {
		errs = append(errs, fmt.Errorf("read action stdout: %w", e))
	}
	text = out.String()
	if len(stdout) > 0 && stdout[len(stdout)-1] != '\n' {
		text = strings.TrimSuffix(text, "\n")
	}
	return text, identity, errors.Join(errs...)
}
