package main

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// sessionFiles lists the JSONL sessions under tree in path order, which is
// what makes the refresh step's choice of sessions deterministic. Sidecars
// (<stem>.v2 and their staging and backup siblings) and the tree's .pisess
// directory are not descended into; symlinks are not followed.
func sessionFiles(tree string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != tree && (name == ".pisess" || strings.Contains(name, ".v2")) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && strings.HasSuffix(name, ".jsonl") {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
