package descriptor

// Options control how descriptors are loaded.
type Options struct {
	// IgnoreUnknown turns unknown keys from errors into warnings; the keys
	// are dropped (GAP-16's "explicitly ignore" extension).
	IgnoreUnknown bool
	// Limits refuse hostile or absurd inputs; zero fields take the defaults.
	Limits Limits
}

// Limits bound the work a descriptor can cause. A zero field means the
// default (see DefaultLimits).
type Limits struct {
	// MaxFileBytes caps one descriptor file (also one file inside a package).
	MaxFileBytes int64
	// MaxAliasNodes caps the values YAML aliases may expand to, per file
	// (alias bombs, "billion laughs").
	MaxAliasNodes int
	// MaxDepth caps the nesting of mappings and sequences.
	MaxDepth int
	// MaxPackageFiles caps the entries of a ZIP package.
	MaxPackageFiles int
	// MaxPackageBytes caps the total uncompressed size of a package.
	MaxPackageBytes int64
	// MaxCompressionRatio caps uncompressed/compressed size of a package entry.
	MaxCompressionRatio int64
}

// DefaultLimits are generous for real descriptors and small for attacks.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:        16 << 20,
		MaxAliasNodes:       100_000,
		MaxDepth:            64,
		MaxPackageFiles:     256,
		MaxPackageBytes:     64 << 20,
		MaxCompressionRatio: 200,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxAliasNodes <= 0 {
		l.MaxAliasNodes = d.MaxAliasNodes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxPackageFiles <= 0 {
		l.MaxPackageFiles = d.MaxPackageFiles
	}
	if l.MaxPackageBytes <= 0 {
		l.MaxPackageBytes = d.MaxPackageBytes
	}
	if l.MaxCompressionRatio <= 0 {
		l.MaxCompressionRatio = d.MaxCompressionRatio
	}
	return l
}
