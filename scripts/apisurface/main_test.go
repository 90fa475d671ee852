package main

import (
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

func TestExported(t *testing.T) {
	const src = `package p
const A, b = 1, 2
var (C int; d int)
type T struct{ Field int }
type u struct{}
type G[P any] struct{}
func F() {}
func f() {}
func (T) M() {}
func (*T) m() {}
func (u) N() {}
func (*G[P]) H() {}
type I interface{ Method() }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := exported(f)
	slices.Sort(got)
	want := []string{"A", "C", "F", "G", "G.H", "I", "T", "T.M"}
	if !slices.Equal(got, want) {
		t.Errorf("exported = %v, want %v", got, want)
	}
}
