package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem in a configuration, at a field path such as
// "bots[2].handle" or "llm.default.base_url" (empty for the whole file).
type FieldError struct {
	Path string
	Msg  string
}

// Error returns "path: msg".
func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Errors is every problem found in a configuration, in file order; Load and
// Validate return it so that a person sees all of them at once. Use errors.As to
// get it from the error Load returns.
type Errors []FieldError

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// problems collects FieldErrors while validating.
type problems struct{ errs Errors }

func (p *problems) add(path, format string, args ...any) {
	p.errs = append(p.errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return p.errs
}
