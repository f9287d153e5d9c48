package config

import (
	"reflect"
	"slices"
	"strings"
	"sync"
)

// yamlKeys maps each struct type of the configuration ("config.Bot") to the
// keys it accepts, read from its yaml tags, so an unknown key can be answered
// with the one meant.
var yamlKeys = sync.OnceValue(func() map[string][]string {
	out := map[string][]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		if _, seen := out[t.String()]; seen {
			return
		}
		out[t.String()] = nil
		out[t.String()] = structKeys(t, walk)
	}
	walk(reflect.TypeOf(Config{}))
	return out
})

// structKeys is the yaml keys of struct t (inline fields' included), calling
// walk on every field's type.
func structKeys(t reflect.Type, walk func(reflect.Type)) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			keys = append(keys, structKeys(f.Type, walk)...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys = append(keys, name)
		walk(f.Type)
	}
	return keys
}

// suggestKey is the key of struct type typ closest to the unknown key, or ""
// when none is within a couple of edits (a third of its length, at least one)
// or the key is a real key of another place (`model` on an account is a key
// put in the wrong place, not a typo of `mode`).
func suggestKey(typ, key string) string {
	for _, keys := range yamlKeys() {
		if slices.Contains(keys, key) {
			return ""
		}
	}
	best, bestD := "", max(1, len(key)/3)+1
	for _, k := range yamlKeys()[typ] {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b, in
// bytes: insertions, deletions, substitutions and swaps of two neighbours
// ("modle" for "model") each count one.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
