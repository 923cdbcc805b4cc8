package durable

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// durable sits at the bottom of pisess (STYLE.md §1): the standard library
// and golang.org/x/sys/unix, nothing else, in either build.
func TestDependencies(t *testing.T) {
	for _, tags := range []string{"", "failpoints", "portable"} {
		out, err := exec.Command("go", "list", "-deps", "-tags", tags,
			"-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "pisess/writers/durable").Output()
		if err != nil {
			t.Fatal("go list:", err)
		}
		want := []string{"golang.org/x/sys/unix", "pisess/writers/durable"}
		if got := strings.Fields(string(out)); !reflect.DeepEqual(got, want) {
			t.Errorf("tags %q: dependencies %q, want %q", tags, got, want)
		}
	}
}
