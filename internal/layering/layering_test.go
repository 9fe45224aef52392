package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/vramscope/vramscope"

// floors is the import table docs/architecture.md draws: a package imports
// only packages on a lower floor, never one on its own floor or above. A
// new package needs a line here, which is where its place is decided.
var floors = map[string]int{
	// 0: leaves, standard library (and go-nvml's interfaces) only.
	"internal/jsonscan": 0,
	"internal/tinyfs":   0,
	"internal/textesc":  0,
	"internal/safefs":   0,
	"internal/layering": 0,
	"monitoring":        0, // assets and their tests: no code
	"internal/fixture":  0,
	"probe":             0,
	"pyhook":            0, // the release version, from the hook's _version.py
	// 1: the wire protocol and the NVML adapter; what the build knows.
	"launch":             1,
	"ipc":                1,
	"probe/nvmlprobe":    1,
	"internal/buildinfo": 1,
	"internal/promtest":  1, // tests' Prometheus; writes through safefs
	// 2: the state, and what speaks the protocol.
	"session": 2,
	"demo":    2,
	"doctor":  2,
	// 3: pure functions of the state, and the state's movers: the
	// diagnosis, the feed, the file, the exporters' formats.
	"diagnose":        3,
	"feed":            3,
	"record":          3,
	"export/csv":      3,
	"export/perfetto": 3,
	// 4: the views, which read the state and its diagnosis.
	"report":  4,
	"metrics": 4, // Prometheus /metrics: the state and its diagnosis
	"diff":    4,
	"plot":    4,
	"tui":     4,
	"suspect": 4,
	"export":  4,
	// 5: what assembles sources, feed and sinks.
	"pipeline": 5,
	// 6: the commands.
	"cli": 6,
	// 7: the program; only main.go (and the end-to-end tests, which run
	// the binary) stand here.
	".":               7,
	"e2e":             7,
	"bench/million":   7,
	"bench/jobreport": 7,
	"bench/monitor":   7,
}

// imports returns each package directory of the module (relative to its
// root, "." for the root) with the module packages its non-test files
// import.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir = filepath.ToSlash(dir)
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		if strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if p == module {
				p = "."
			} else if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				p = rest
			} else {
				continue
			}
			if !slices.Contains(out[dir], p) {
				out[dir] = append(out[dir], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImportsGoDownOnly fails on an import of a package on the same floor
// or above, and on a package the table does not place.
func TestImportsGoDownOnly(t *testing.T) {
	pkgs := imports(t, filepath.Join("..", ".."))
	if len(pkgs) < len(floors)-1 {
		t.Fatalf("found %d packages, the table has %d: the walk is broken", len(pkgs), len(floors))
	}
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		f, ok := floors[dir]
		if !ok {
			t.Errorf("package %s has no floor: give it one in floors (and in docs/architecture.md)", dir)
			continue
		}
		for _, imp := range pkgs[dir] {
			g, ok := floors[imp]
			if !ok {
				t.Errorf("%s imports %s, which has no floor", dir, imp)
			} else if g >= f {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports go down only", dir, f, imp, g)
			}
		}
	}
	for dir := range floors {
		if _, ok := pkgs[dir]; !ok {
			t.Errorf("floors places %s, which has no Go files: drop it", dir)
		}
	}
}

// TestRootHoldsOnlyMain pins that the root package is main.go alone: the
// commands live in cli, the work below it.
func TestRootHoldsOnlyMain(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".go") && e.Name() != "main.go" {
			t.Errorf("%s is at the root: the root holds main.go only (docs/architecture.md)", e.Name())
		}
	}
}
