package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// ApprovalTool is one bots[].approval_tools entry (DESIGN.md §5): a tool name or
// pattern ("shell", "<mcp server>", "<mcp server>__*"), written either as that
// string or as a mapping {tool: shell, approvers: [slack:T1:U1]} that also names
// who may approve calls of it (overriding the bot's and the global approvers).
type ApprovalTool struct {
	Tool string `yaml:"tool"`
	// Approvers are platform actor ids; empty means the bot's approvers.
	Approvers []string `yaml:"approvers"`

	// bad holds what UnmarshalYAML could not take, reported by Validate at the
	// entry's path. Returning it from UnmarshalYAML instead would make yaml drop
	// the entry and shift the indexes of the ones after it.
	bad []FieldError
}

// UnmarshalYAML takes the string form or the mapping form. Unknown keys, values
// of the wrong type and other shapes are kept as problems that Validate reports
// at the entry's field path.
func (a *ApprovalTool) UnmarshalYAML(n *yaml.Node) error {
	*a = ApprovalTool{}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Decode(&a.Tool) != nil {
			a.bad = append(a.bad, FieldError{Msg: fmt.Sprintf("%q is not a tool name (line %d)", n.Value, n.Line)})
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch k.Value {
			case "tool":
				if v.Kind != yaml.ScalarNode || v.Decode(&a.Tool) != nil {
					a.bad = append(a.bad, FieldError{Path: "tool", Msg: fmt.Sprintf("must be a tool name (line %d)", v.Line)})
				}
			case "approvers":
				if v.Kind != yaml.SequenceNode || v.Decode(&a.Approvers) != nil {
					a.bad = append(a.bad, FieldError{Path: "approvers", Msg: fmt.Sprintf("must be a list of actor ids such as [\"slack:T012:U345\"] (line %d)", v.Line)})
				}
			default:
				a.bad = append(a.bad, FieldError{Path: k.Value, Msg: fmt.Sprintf("unknown key %q (line %d); an entry takes tool and approvers", k.Value, k.Line)})
			}
		}
		if a.Tool == "" && len(a.bad) == 0 {
			a.bad = append(a.bad, FieldError{Path: "tool", Msg: fmt.Sprintf("must be set (line %d)", n.Line)})
		}
	default:
		a.bad = append(a.bad, FieldError{Msg: fmt.Sprintf("an approval_tools entry is a tool name or {tool: NAME, approvers: [...]} (line %d)", n.Line)})
	}
	a.Tool = strings.TrimSpace(a.Tool)
	return nil
}

// MarshalYAML writes the string form when no approvers are named.
func (a ApprovalTool) MarshalYAML() (any, error) {
	if len(a.Approvers) == 0 {
		return a.Tool, nil
	}
	type plain ApprovalTool
	return plain(a), nil
}

// ApprovalToolNames returns the tool names or patterns of entries, in order.
func ApprovalToolNames(entries []ApprovalTool) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Tool
	}
	return out
}

// validateApprovalTools checks bots[i].approval_tools: each entry names a tool
// once, and its approvers are actor ids.
func validateApprovalTools(p *problems, path string, entries []ApprovalTool) {
	var names []string
	for j, e := range entries {
		at := fmt.Sprintf("%s[%d]", path, j)
		for _, b := range e.bad {
			if b.Path != "" {
				b.Path = at + "." + b.Path
			} else {
				b.Path = at
			}
			p.errs = append(p.errs, b)
		}
		if len(e.bad) == 0 {
			names = append(names, e.Tool)
		} else {
			names = append(names, fmt.Sprintf("\x00bad%d", j)) // reported above; keeps indexes
		}
		checkApprovers(p, at+".approvers", e.Approvers)
	}
	checkNames(p, path, names)
}
