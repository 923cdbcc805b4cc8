package main

import (
	"go/parser"
	"go/token"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// layoutRow is one line of doc.go's layout table.
type layoutRow struct {
	pkg     string
	imports []string
}

// layoutTable reads the table of doc.go's Layout section, in its order.
func layoutTable(t *testing.T) []layoutRow {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var rows []layoutRow
	in := false
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if strings.HasPrefix(line, "# ") {
			in = line == "# Layout"
			continue
		}
		cols := strings.Split(line, "|")
		if !in || !strings.HasPrefix(line, "\t") || len(cols) != 3 {
			continue
		}
		pkg := strings.TrimSpace(cols[0])
		if pkg == "package" {
			continue // the header
		}
		imports := strings.Fields(cols[2])
		if len(imports) == 1 && imports[0] == "-" {
			imports = nil
		}
		rows = append(rows, layoutRow{pkg, imports})
	}
	if len(rows) == 0 {
		t.Fatal("doc.go has no layout table")
	}
	return rows
}

// goListImports returns each pisess package's pisess imports (short
// names, "main" for the root), from go list with the given build tags.
func goListImports(t *testing.T, tags string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-tags", tags, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr)
	}
	short := func(p string) (string, bool) {
		if p == "pisess" {
			return "main", true
		}
		rest, ok := strings.CutPrefix(p, "pisess/")
		return rest, ok
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := short(fields[0])
		if !ok {
			t.Fatalf("go list: %q is not a pisess package", fields[0])
		}
		got[pkg] = []string{}
		for _, imp := range fields[1:] {
			if s, ok := short(imp); ok {
				got[pkg] = append(got[pkg], s)
			}
		}
	}
	return got
}

// TestLayout: every package has a line in doc.go's layout table, imports
// only the pisess packages its line names (in every build: plain, with the
// failpoints the crash harness builds, with the profile tag), and a line
// names only packages on lines below it, so that imports point one way.
func TestLayout(t *testing.T) {
	rows := layoutTable(t)
	pos := map[string]int{}
	for i, r := range rows {
		if _, dup := pos[r.pkg]; dup {
			t.Errorf("doc.go: %s has two lines", r.pkg)
		}
		pos[r.pkg] = i
	}
	for i, r := range rows {
		for _, imp := range r.imports {
			switch j, ok := pos[imp]; {
			case !ok:
				t.Errorf("doc.go: %s may import %s, which has no line", r.pkg, imp)
			case j <= i:
				t.Errorf("doc.go: %s may import %s, which is not below it", r.pkg, imp)
			}
		}
	}
	for _, tags := range []string{"", "failpoints", "profile", "portable"} {
		got := goListImports(t, tags)
		for pkg, imports := range got {
			i, ok := pos[pkg]
			if !ok {
				t.Errorf("package %s has no line in doc.go's layout table", pkg)
				continue
			}
			for _, imp := range imports {
				if !slices.Contains(rows[i].imports, imp) {
					t.Errorf("tags %q: %s imports %s, which its line in doc.go does not allow", tags, pkg, imp)
				}
			}
		}
		for _, r := range rows {
			if _, ok := got[r.pkg]; !ok {
				t.Errorf("doc.go names %s, which go list does not find", r.pkg)
			}
		}
	}
}
