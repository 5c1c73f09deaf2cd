// Package docs holds the user documentation. Its test runs the commands of
// the docs in runDocs as written, from a fresh copy of the
// repository, and checks what they print against the docs' own output
// blocks, so that the docs a newcomer follows cannot drift from the code.
//
// How the docs mark what the test reads (DEVELOPERS.md, "Docs are tested", says it for authors):
//   - a ```sh block is run, one line at a time, in one shell session
//     (what a line leaves, variables, exports, cd, is there for the next);
//   - a ```text block is the expected output (stdout and stderr, as a terminal
//     shows them) of the last command run before it;
//   - a ```console block holds "$ command" lines, each followed by its
//     expected output;
//   - `<!-- doc-test: skip REASON -->` on the line before a block leaves it out;
//   - any other fenced block must say what it is (yaml, json, go, ...): an
//     unlabelled block would be neither run nor checked, so it is an error.
//
// In expected output, "..." inside a line matches any text, and a line that
// is only "..." matches any number of lines. Durations, local ports, VPN
// addresses, hex ids and devnet provider names differ on every run: both sides have them replaced by
// placeholders before comparing, and runs of spaces (table padding) count as
// one.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The docs this test runs, in order: the README's first app, then the tutorial.
var runDocs = []string{"README.md", "docs/tutorial.md"}

func TestDocsRunAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the docs' commands against Docker and the devnet")
	}
	for _, tool := range []string{"bash", "docker", "docker-compose", "curl", "make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the docs need %s: %v", tool, err)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	repo := freshCopy(t, root)
	sess := newSession(t, repo)
	for _, doc := range runDocs {
		src, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseBlocks(doc, string(src))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.ReplaceAll(doc, "/", "_"), func(t *testing.T) { sess.runDoc(t, blocks) })
		if t.Failed() {
			return // later docs build on earlier ones
		}
	}
}

// TestDocsMarkup reads the docs' markup without running anything, so that
// an unlabelled or unclosed block fails `go test -short` too.
func TestDocsMarkup(t *testing.T) {
	for _, doc := range runDocs {
		src, err := os.ReadFile(filepath.Join("..", doc))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := parseBlocks(doc, string(src))
		if err != nil {
			t.Fatal(err)
		}
		run, checked := 0, 0
		for _, b := range bs {
			switch {
			case b.skip != "":
			case b.kind == "sh" || b.kind == "console":
				run++
			case b.kind == "text":
				checked++
			}
		}
		if run == 0 || checked == 0 {
			t.Errorf("%s: %d blocks run, %d outputs checked: the doc test would test nothing", doc, run, checked)
		}
	}
}

// TestParseBlocks keeps the doc markup honest: what is run, what is checked,
// and that an unlabelled block is refused.
func TestParseBlocks(t *testing.T) {
	src := "intro\n```sh\nmake build   # comment\n\n# only a comment\nbin/x\n```\n" +
		"```text\nout 1\n```\n<!-- doc-test: skip needs Golem -->\n```sh\nyagna\n```\n" +
		"  ```console\n  $ a b\n  line\n  ```\n```yaml\nk: v\n```\n"
	bs, err := parseBlocks("x.md", src)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, fmt.Sprintf("%s:%d:%v:%q", b.kind, b.line, b.skip != "", b.body))
	}
	want := []string{
		`sh:2:false:["make build   # comment" "" "# only a comment" "bin/x"]`,
		`text:8:false:["out 1"]`,
		`sh:12:true:["yagna"]`,
		`console:15:false:["$ a b" "line"]`,
		`yaml:19:false:["k: v"]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := parseBlocks("x.md", "```\nwhat am I\n```\n"); err == nil || !strings.Contains(err.Error(), "x.md:1: a fenced block without a language") {
		t.Errorf("unlabelled block: %v", err)
	}
	if _, err := parseBlocks("x.md", "```sh\nls\n"); err == nil || !strings.Contains(err.Error(), "x.md:1: unclosed") {
		t.Errorf("unclosed block: %v", err)
	}
}

func TestMatchOutput(t *testing.T) {
	for _, tc := range []struct {
		name, want, got string
		ok              bool
	}{
		{"exact", "a\nb", "a\nb\n", true},
		{"a line differs", "a\nb", "a\nc", false},
		{"a line missing", "a\nb", "a", false},
		{"an extra line", "a", "a\nb", false},
		{"padding", "NAME   STATUS\nx      Active", "NAME STATUS\nx    Active", true},
		{"elided lines", "start\n...\nend", "start\n1\n2\nend", true},
		{"elided nothing", "start\n...\nend", "start\nend", true},
		{"elision keeps order", "end\n...\nstart", "start\nend", false},
		{"in-line elision", "served by ... (across the VPN). ...", "served by p1 (across the VPN). <p>rest", true},
		{"volatile parts", "up at http://127.0.0.1:36927/ in 1.2s, db 192.168.77.2, id 9606a0a993d5",
			"up at http://127.0.0.1:41001/ in 830ms, db 192.168.77.14, id 0123456789abcdef", true},
		{"providers", "served by devnet-small-1", "served by devnet-small-0", true},
		{"node ids", "devnet-large-3 (0x1ef300e11a30368a53d2d3f4d92ecd2a818e2f38)", "devnet-large-0 (0x1891c46d05874c95dcdfe173738e0bfd9e32b5a8)", true},
		{"counts are not volatile", "Plan: 3 to create", "Plan: 4 to create", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := matchOutput(tc.want, tc.got); (err == nil) != tc.ok {
				t.Errorf("matchOutput(%q, %q) = %v, want ok=%v", tc.want, tc.got, err, tc.ok)
			}
		})
	}
}

// TestSessionIsOneShell: the docs' commands run as in one terminal: what a
// line leaves (a plain variable, an export, a cd) is there for the next, a
// command's stdin is empty, and both its streams are its output.
func TestSessionIsOneShell(t *testing.T) {
	s := startShell(t, t.TempDir(), os.Environ())
	for _, tc := range []struct {
		cmd, out string
		rc       int
	}{
		{"ACT=$(echo 42 | sed -n 's/\\(4\\)2/\\1x/p')", "", 0},
		{"export Y=7", "", 0},
		{"mkdir sub && cd sub", "", 0},
		{`echo "$ACT $Y ${PWD##*/}"`, "4x 7 sub\n", 0},
		{"cat", "", 0},
		{"echo out; echo err >&2", "out\nerr\n", 0},
		{"false | true", "", 1}, // pipefail, as before
		{"(exit 3)", "", 3},
		{"echo still here", "still here\n", 0},
	} {
		out, rc, err := s.do(tc.cmd, time.Minute)
		if err != nil {
			t.Fatalf("$ %s: %v", tc.cmd, err)
		}
		if out != tc.out || rc != tc.rc {
			t.Errorf("$ %s: printed %q, exit %d; want %q, exit %d", tc.cmd, out, rc, tc.out, tc.rc)
		}
	}
}

// block is one fenced block of a doc.
type block struct {
	kind string // the fence's info string: sh, text, console, yaml, ...
	line int    // of the opening fence, 1-based
	body []string
	skip string // the reason from <!-- doc-test: skip REASON -->
}

var skipComment = regexp.MustCompile(`^<!--\s*doc-test:\s*skip\s+(.*?)\s*-->$`)

func parseBlocks(doc, src string) ([]block, error) {
	lines := strings.Split(src, "\n")
	var out []block
	skip := ""
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if m := skipComment.FindStringSubmatch(l); m != nil {
			skip = m[1]
			continue
		}
		if !strings.HasPrefix(l, "```") {
			if l != "" {
				skip = "" // the comment applies to the block right after it
			}
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		b := block{kind: strings.TrimSpace(strings.TrimPrefix(l, "```")), line: i + 1, skip: skip}
		skip = ""
		if b.kind == "" {
			return nil, fmt.Errorf("%s:%d: a fenced block without a language: say what it is (sh runs, text and console are checked, yaml/json/go/... are not; docs/docs_test.go)", doc, b.line)
		}
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			body := lines[i]
			if len(body)-len(strings.TrimLeft(body, " ")) >= indent {
				body = body[indent:]
			}
			b.body = append(b.body, body)
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: unclosed fenced block", doc, b.line)
		}
		out = append(out, b)
	}
	return out, nil
}

// session is one shell session over the docs: one bash process reads the
// commands one at a time, as a reader's terminal would, so that whatever a
// command leaves (a variable, an export, a cd) is there for the next one.
// (Running each command in a bash of its own and carrying only the exports
// over lost plain variables: the tutorial's ACT=$(...) was empty on the
// next line, and its drift step killed nothing.)
type session struct {
	repo  string
	base  []string
	out   string // where the current command's output goes
	stdin io.WriteCloser
	done  chan string // the lines bash itself prints: our end-of-command markers
	shell *syncBuffer // bash's own stderr: syntax errors and the like
	n     int
	last  *ran
}

type ran struct {
	cmd, where, output string
}

// syncBuffer is a bytes.Buffer for a writer goroutine and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newSession(t *testing.T, repo string) *session {
	// A devnet of our own (project and port) so that the tutorial replaces
	// no one's devnet and nobody's replaces ours (docker-compose.yml).
	project := fmt.Sprintf("gcompose-doctest-%d", os.Getpid())
	port := strconv.Itoa(freePort(t))
	var base []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "YAGNA_"), strings.HasPrefix(k, "GCOMPOSE_"), strings.HasPrefix(k, "COMPOSE_"), k == "TERM", k == "NO_COLOR":
			continue // what the reader's shell would not have
		}
		base = append(base, kv)
	}
	base = append(base, "COMPOSE_PROJECT_NAME="+project, "GCOMPOSE_DEVNET_PORT="+port, "TERM=dumb", "NO_COLOR=1")
	s := startShell(t, repo, base)
	t.Cleanup(func() {
		// Whatever the docs left when a step failed: the app, then the devnet
		// (stopping it removes its providers and networks).
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		url := "YAGNA_API_URL=http://127.0.0.1:" + port
		for _, c := range [][]string{
			{"env", url, "YAGNA_APPKEY=devnet-appkey", "bin/gcompose", "destroy", "-f", "examples/webapp/webapp.yaml", "--yes"},
			{"env", url, "YAGNA_APPKEY=devnet-appkey", "bin/gcompose", "destroy", "-f", "examples/counter/gcompose.yaml", "--yes"},
			{"bin/gcompose", "destroy", "-f", "examples/files/gcompose.yaml", "--yes"},
			{"docker-compose", "down", "-v", "--remove-orphans"}, // -v: the devnet's VPN socket volume too
			// The images the tutorial's own app built from this copy (labelled with their folders).
			{"sh", "-c", "for d in counter front; do docker images -q --filter label=gcompose.build.context=$(pwd)/examples/counter/$d | xargs -r docker rmi -f; done"},
		} {
			cmd := exec.CommandContext(ctx, c[0], c[1:]...)
			cmd.Dir, cmd.Env = repo, base
			if out, err := cmd.CombinedOutput(); err != nil && c[0] == "docker-compose" {
				t.Logf("cleanup %s: %v\n%s", strings.Join(c, " "), err, out)
			}
		}
	})
	return s
}

// startShell starts the session's bash in dir with env; it ends with the test.
func startShell(t *testing.T, dir string, env []string) *session {
	s := &session{repo: dir, base: env, out: filepath.Join(t.TempDir(), "out"), done: make(chan string, 16), shell: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	sh := exec.CommandContext(ctx, "bash", "--noprofile", "--norc")
	sh.Dir, sh.Env, sh.Stderr = dir, env, s.shell
	sh.WaitDelay = 5 * time.Second
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatalf("starting the docs' shell: %v", err)
	}
	s.stdin = stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.done <- sc.Text()
		}
		close(s.done)
	}()
	if _, err := io.WriteString(stdin, "set -o pipefail\n"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		exited := make(chan struct{})
		go func() { _ = sh.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
		cancel()
		<-exited
	})
	return s
}

func (s *session) runDoc(t *testing.T, blocks []block) {
	for _, b := range blocks {
		if b.skip != "" {
			t.Logf("line %d: skipped (%s)", b.line, b.skip)
			continue
		}
		switch b.kind {
		case "sh":
			for i, l := range b.body {
				if c := strings.TrimSpace(l); c != "" && !strings.HasPrefix(c, "#") {
					s.run(t, c, fmt.Sprintf("line %d", b.line+1+i))
				}
			}
		case "text":
			if s.last == nil {
				t.Fatalf("line %d: an output block with no command run before it", b.line)
			}
			s.check(t, b.line, strings.Join(b.body, "\n"))
		case "console":
			var want []string
			for i, l := range b.body {
				if c, ok := strings.CutPrefix(l, "$ "); ok {
					if s.last != nil && want != nil {
						s.check(t, b.line, strings.Join(want, "\n"))
					}
					want = []string{}
					s.run(t, c, fmt.Sprintf("line %d", b.line+1+i))
					continue
				}
				if want == nil {
					t.Fatalf("line %d: a console block must start with a \"$ command\" line", b.line)
				}
				want = append(want, l)
			}
			if want != nil {
				s.check(t, b.line, strings.Join(want, "\n"))
			}
		}
	}
}

// run runs one command line of a doc, as written, in the session's shell;
// it must succeed.
func (s *session) run(t *testing.T, command, where string) {
	start := time.Now()
	out, rc, err := s.do(command, 5*time.Minute)
	if err != nil {
		t.Fatalf("%s: $ %s\n%v", where, command, err)
	}
	t.Logf("%s: $ %s (%s)", where, command, time.Since(start).Round(time.Millisecond))
	s.last = &ran{cmd: command, where: where, output: out}
	if rc != 0 {
		t.Fatalf("%s: $ %s\nfailed: exit status %d\n%s%s", where, command, rc, out, s.shell.String())
	}
}

// do runs one command in the session's shell and returns what it printed
// and its exit status. Its stdin is empty (no terminal); its stdout and
// stderr go to one file, as a terminal shows both.
func (s *session) do(command string, timeout time.Duration) (string, int, error) {
	s.n++
	marker := fmt.Sprintf("__doc_test_done_%d ", s.n)
	script := "{ " + command + "\n} </dev/null >" + strconv.Quote(s.out) + " 2>&1\nprintf '%s%d\\n' " + strconv.Quote(marker) + " \"$?\"\n"
	if _, err := io.WriteString(s.stdin, script); err != nil {
		return "", -1, fmt.Errorf("the docs' shell is gone: %v\n%s", err, s.shell.String())
	}
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-s.done:
			if !ok {
				return "", -1, fmt.Errorf("the docs' shell exited:\n%s", s.shell.String())
			}
			code, found := strings.CutPrefix(l, marker)
			if !found {
				continue
			}
			rc, err := strconv.Atoi(code)
			if err != nil {
				return "", -1, fmt.Errorf("the docs' shell said %q", l)
			}
			out, err := os.ReadFile(s.out)
			return string(out), rc, err
		case <-deadline:
			return "", -1, fmt.Errorf("still running after %s", timeout)
		}
	}
}

func (s *session) check(t *testing.T, line int, want string) {
	if err := matchOutput(want, s.last.output); err != nil {
		t.Errorf("line %d: the output block does not match what `%s` (%s) printed: %v\n--- the doc says:\n%s\n--- it printed:\n%s",
			line, s.last.cmd, s.last.where, err, want, s.last.output)
	}
}

var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`\b192\.168\.\d+\.\d+\b`), "<vpn-ip>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`), "<duration>"},
	// Node ids (yagna's 0x + 40 hex): the devnet's differ per instance.
	{regexp.MustCompile(`\b0x[0-9a-f]{40}\b`), "<node-id>"},
	{regexp.MustCompile(`\b[0-9a-f]{12,}\b`), "<hex>"},
	// The devnet's providers: which one wins an agreement varies.
	{regexp.MustCompile(`\bdevnet-[a-z]+-\d+\b`), "<provider>"},
}

func normalize(s string) []string {
	s = strings.TrimRight(s, "\n \t")
	if s == "" {
		return nil
	}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, v := range volatile {
			l = v.re.ReplaceAllString(l, v.with)
		}
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

// matchOutput says whether got is what want describes (see the package doc).
func matchOutput(want, got string) error {
	w, g := normalize(want), normalize(got)
	pats := make([]*regexp.Regexp, len(w))
	for i, l := range w {
		if l == "..." {
			continue
		}
		parts := strings.Split(l, "...")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		pats[i] = regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
	}
	// Backtracking over "..." lines; docs are short.
	var match func(i, j int) bool
	best := 0 // the furthest expected line matched, for the error
	match = func(i, j int) bool {
		if i > best {
			best = i
		}
		if i == len(w) {
			return j == len(g)
		}
		if pats[i] == nil {
			for k := j; k <= len(g); k++ {
				if match(i+1, k) {
					return true
				}
			}
			return false
		}
		return j < len(g) && pats[i].MatchString(g[j]) && match(i+1, j+1)
	}
	if match(0, 0) {
		return nil
	}
	if best < len(w) {
		return fmt.Errorf("no match for the doc's line %q (normalized)", w[best])
	}
	return fmt.Errorf("it printed more than the doc shows")
}

// freshCopy copies the working tree's files (tracked and new, not ignored:
// what a clone would hold, with the uncommitted edits being tested) into a
// temporary directory.
func freshCopy(t *testing.T, root string) string {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("listing the repository's files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "gcompose")
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
