package config

import (
	"fmt"
	"strconv"
	"strings"
)

// nameUnsetVars adds to each "must be set" problem whose field was written as
// ${VAR} in the file the variables that lookup does not have (or has empty),
// so the report says what to set: `llm.default.base_url: must be set (written
// as ${LLM_URL}, which is not set)`. lookup nil means every variable is unset.
func (c *Config) nameUnsetVars(errs Errors, lookup LookupEnv) {
	for i, e := range errs {
		if !strings.HasPrefix(e.Msg, "must be set") {
			continue
		}
		var unset []string
		for _, v := range c.EnvVars(fieldPath(e.Path)...) {
			if lookup != nil {
				if val, ok := lookup(v); ok && val != "" {
					continue
				}
			}
			unset = append(unset, "${"+v+"}")
		}
		switch len(unset) {
		case 0:
		case 1:
			errs[i].Msg += fmt.Sprintf(" (written as %s, which is not set)", unset[0])
		default:
			errs[i].Msg += fmt.Sprintf(" (written with %s, which are not set)", strings.Join(unset, ", "))
		}
	}
}

// fieldPath splits a problem's field path ("bots[2].handle") into the keys and
// indexes EnvVars takes ("bots", 2, "handle").
func fieldPath(path string) []any {
	var out []any
	for _, part := range strings.Split(path, ".") {
		for part != "" {
			open := strings.IndexByte(part, '[')
			if open < 0 {
				out = append(out, part)
				break
			}
			if open > 0 {
				out = append(out, part[:open])
			}
			end := strings.IndexByte(part[open:], ']')
			if end < 0 {
				return nil
			}
			n, err := strconv.Atoi(part[open+1 : open+end])
			if err != nil {
				return nil
			}
			out = append(out, n)
			part = part[open+end+1:]
		}
	}
	return out
}
