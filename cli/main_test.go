package cli

import (
	"os"
	"testing"
)

// TestMain runs the tests from the repository root, where the shared
// testdata/ and the main package are.
func TestMain(m *testing.M) {
	if err := os.Chdir(".."); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
