package cli

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/record"
)

// TestNoWrittenFileFollowsWhatWasPlanted: `run`'s default log (a name
// predictable to the second) and --debug FILE followed a symlink planted
// at their name and truncated or appended to its target, as export -o and
// plot -o did the round before. Every file the program writes now opens
// through internal/safefs: no symlink followed, no hard link written
// through. The first half finds every opener in the source; the second
// plants a symlink and a hard link at each command's file.
func TestNoWrittenFileFollowsWhatWasPlanted(t *testing.T) {
	t.Run("every opener is safefs", func(t *testing.T) {
		forbidden := map[string]bool{"Create": true, "OpenFile": true, "WriteFile": true}
		fset := token.NewFileSet()
		filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin" || path == filepath.Join("internal", "safefs")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if id, isID := sel0(sel, ok); isID && id.Name == "os" && forbidden[sel.Sel.Name] {
					t.Errorf("%s: os.%s writes a file by path; open it with internal/safefs", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
			return nil
		})
	})
	const rec = "testdata/h100/s001.jsonl.gz"
	openers := []struct {
		name string
		open func(path string) error
	}{
		{"run --log", func(p string) error { return closeIf(openRunLog(p)) }},
		{"--debug", func(p string) error {
			logf, closer, err := debugLog(p)
			if err == nil {
				logf("a line")
				closer()
			}
			return err
		}},
		{"record -o", func(p string) error { return closeIf(record.Create(p, record.Header{})) }},
		{"record -o, overwriting", func(p string) error { return closeIf(record.Create(p, record.Header{}, record.WithOverwrite())) }},
		{"export -o", func(p string) error { return runExport(rec, "csv", p, false, io.Discard, io.Discard) }},
		{"plot -o", func(p string) error {
			return runPlot(rec, p+".svg", "", plotOptsDefault(), false, io.Discard, io.Discard)
		}},
		{"--cpuprofile", func(p string) error {
			root := newRootCmd()
			root.SetArgs([]string{"--cpuprofile", p, "version"})
			root.SetOut(io.Discard)
			return root.Execute()
		}},
	}
	for _, o := range openers {
		for _, plant := range []string{"symlink", "hard link"} {
			t.Run(o.name+", "+plant, func(t *testing.T) {
				dir := t.TempDir()
				victim := filepath.Join(dir, "victim")
				if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
					t.Fatal(err)
				}
				name := filepath.Join(dir, "out")
				if o.name == "plot -o" {
					name += ".svg"
				}
				link := os.Symlink
				if plant == "hard link" {
					link = os.Link
				}
				if err := link(victim, name); err != nil {
					t.Fatal(err)
				}
				err := o.open(strings.TrimSuffix(name, ".svg"))
				if b, _ := os.ReadFile(victim); !bytes.Equal(b, []byte("precious")) {
					t.Errorf("the %s's target was written: %q", plant, b)
				}
				if err == nil {
					t.Errorf("a %s at the file's name was accepted", plant)
				}
			})
		}
	}
}

func sel0(sel *ast.SelectorExpr, ok bool) (*ast.Ident, bool) {
	if !ok {
		return nil, false
	}
	id, ok := sel.X.(*ast.Ident)
	return id, ok
}

// closeIf closes what an opener returned when it succeeded.
func closeIf[T io.Closer](c T, err error) error {
	if err == nil {
		c.Close()
	}
	return err
}
