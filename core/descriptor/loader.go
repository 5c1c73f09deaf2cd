package descriptor

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gcompose/gcompose/core/source"
)

// Loader loads descriptors. It holds the compiled schema, so build one and
// reuse it; a Loader is safe for concurrent use.
type Loader struct {
	opts   Options
	schema *schemaValidator
}

// NewLoader compiles the embedded descriptor schema.
func NewLoader(opts Options) (*Loader, error) {
	sv, err := newSchemaValidator()
	if err != nil {
		return nil, fmt.Errorf("descriptor loader: %w", err)
	}
	opts.Limits = opts.Limits.withDefaults()
	return &Loader{opts: opts, schema: sv}, nil
}

// Load is NewLoader(opts).Load(ctx, paths...), for one-off use.
func Load(ctx context.Context, opts Options, paths ...string) (*App, source.Diagnostics) {
	l, err := NewLoader(opts)
	if err != nil {
		var ds source.Diagnostics
		ds.Errorf(source.Pos{}, "%v", err)
		return nil, ds
	}
	return l.Load(ctx, paths...)
}

// Source is one descriptor given as bytes: a YAML file, or a ZIP package
// when Name ends in .zip.
type Source struct {
	Name string // how positions call it
	Data []byte
}

// Load reads the descriptor files (a path ending in .zip is a package) and
// merges them in order, then validates and normalizes the result. It returns
// the App (nil when the input could not be read, merged or schema-validated)
// and every problem found, sorted by position; warnings are also in
// App.Warnings. The App is usable only when the diagnostics hold no error.
func (l *Loader) Load(ctx context.Context, paths ...string) (*App, source.Diagnostics) {
	var diags source.Diagnostics
	srcs := make([]Source, 0, len(paths))
	for _, p := range paths {
		data, err := l.readFile(p)
		if err != nil {
			diags.Errorf(source.Pos{File: p}, "%v", err)
			continue
		}
		srcs = append(srcs, Source{Name: p, Data: data})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return l.LoadSources(ctx, srcs...)
}

// readFile reads a descriptor or package, refusing one larger than allowed
// before reading it.
func (l *Loader) readFile(path string) ([]byte, error) {
	max := l.opts.Limits.MaxFileBytes
	if strings.HasSuffix(strings.ToLower(path), ".zip") {
		max = l.opts.Limits.MaxPackageBytes
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading descriptor: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading descriptor: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("is a directory, not a descriptor file or .zip package")
	}
	if st.Size() > max {
		return nil, fmt.Errorf("file is %d bytes, more than the %d allowed", st.Size(), max)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("reading descriptor: %w", err)
	}
	return data, nil
}

// LoadSources is Load for descriptors already in memory (stdin, tests).
func (l *Loader) LoadSources(ctx context.Context, srcs ...Source) (app *App, diags source.Diagnostics) {
	defer func() { diags.Sort() }()
	if len(srcs) == 0 {
		diags.Errorf(source.Pos{}, "no descriptor file given")
		return nil, diags
	}
	ordered := &merger{}
	var merged *value
	files := make([]string, 0, len(srcs))
	for _, src := range srcs {
		if err := ctx.Err(); err != nil {
			diags.Errorf(source.Pos{File: src.Name}, "loading stopped: %v", err)
			return nil, diags
		}
		tree, names, ds := l.parseSource(src)
		diags = append(diags, ds...)
		files = append(files, names...)
		if tree == nil {
			continue
		}
		merged = ordered.merge(merged, tree, nil)
	}
	diags = append(diags, ordered.diags...)
	if diags.HasErrors() || merged == nil {
		return nil, diags
	}
	var later source.Diagnostics // from normalizing and checking
	build := func() {
		var nds source.Diagnostics
		app, nds = normalize(merged, files, srcs[0].Name)
		later = append(nds, checkApp(app)...)
	}
	if l.opts.IgnoreUnknown {
		// The schema pass drops unknown keys: it must come first.
		diags = append(diags, l.schema.check(merged, true)...)
		if diags.HasErrors() {
			return nil, diags
		}
		build()
	} else {
		// Both only read the tree: validate while normalizing, and keep the
		// App only when the schema is satisfied.
		done := make(chan struct{})
		go func() {
			defer close(done)
			build()
		}()
		sds := l.schema.check(merged, false)
		<-done
		diags = append(diags, sds...)
		if diags.HasErrors() {
			return nil, diags
		}
	}
	diags = append(diags, later...)
	app.Warnings = diags.Warnings()
	app.Warnings.Sort()
	return app, diags
}

// parseSource parses one source: a YAML file, or a package whose root files
// merge without regard to order. It returns the tree and the files it read.
func (l *Loader) parseSource(src Source) (*value, []string, source.Diagnostics) {
	lim := l.opts.Limits
	if !strings.HasSuffix(strings.ToLower(src.Name), ".zip") {
		tree, ds := parseFile(src.Name, src.Data, lim)
		return tree, []string{src.Name}, ds
	}
	files, diags := readPackage(src.Name, src.Data, lim)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	unordered := &merger{unordered: true}
	var tree *value
	names := make([]string, 0, len(files))
	for _, f := range files {
		t, ds := parseFile(f.name, f.data, lim)
		diags = append(diags, ds...)
		names = append(names, f.name)
		if t != nil {
			tree = unordered.merge(tree, t, nil)
		}
	}
	diags = append(diags, unordered.diags...)
	if diags.HasErrors() {
		return nil, names, diags
	}
	return tree, names, diags
}
