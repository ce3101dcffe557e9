package rnic

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
)

// vocabularyTypes are the types of package qp and mr whose every exported
// constant verbs.go names again.
var vocabularyTypes = map[string][]string{
	"qp": {"Type", "State", "AttrMask", "MTU", "WROpcode", "SendFlags", "WCStatus", "WCOpcode", "WCFlags", "EventType"},
	"mr": {"Access", "MWType"},
}

// Every constant of the verbs' enums in qp and mr has its name in rnic
// (verbs.go), so a program needs no other package: a constant added to qp
// or mr without its alias fails here. The oracle is the packages' source.
func TestVerbsVocabulary(t *testing.T) {
	fset := token.NewFileSet()
	aliased := map[string]bool{} // "qp.RC"
	f, err := parser.ParseFile(fset, "verbs.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, s := range g.Specs {
				for _, v := range s.(*ast.ValueSpec).Values {
					if sel, ok := v.(*ast.SelectorExpr); ok {
						aliased[sel.X.(*ast.Ident).Name+"."+sel.Sel.Name] = true
					}
				}
			}
		}
	}
	for pkg, types := range vocabularyTypes {
		pkgs, err := parser.ParseDir(fset, "../"+pkg, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range pkgs {
			for _, file := range p.Files {
				for _, d := range file.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.CONST {
						continue
					}
					typ := ""
					for _, s := range g.Specs {
						vs := s.(*ast.ValueSpec)
						if id, ok := vs.Type.(*ast.Ident); ok {
							typ = id.Name
						}
						for _, name := range vs.Names {
							if !name.IsExported() || !contains(types, typ) {
								continue
							}
							n++
							if !aliased[pkg+"."+name.Name] {
								t.Errorf("%s.%s (a %s) has no name in rnic's verbs.go", pkg, name.Name, typ)
							}
						}
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("found no constants of %v in package %s", types, pkg)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
