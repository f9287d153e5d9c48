package agents

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Registry errors.
var (
	// ErrDuplicateTool is returned by Registry.Add and SetSource when a tool name is
	// already taken by another tool.
	ErrDuplicateTool = errors.New("duplicate tool")
	// ErrInvalidToolName is returned by Registry.Add and SetSource for a name the
	// OpenAI API refuses (it must match ^[a-zA-Z0-9_-]{1,64}$), or for a source tool
	// not named "<source>__<tool>".
	ErrInvalidToolName = errors.New("invalid tool name")
	// ErrUnknownTool is returned by Registry.Select for names that match no tool.
	ErrUnknownTool = errors.New("unknown tool")
)

// SourceSeparator joins a tool source and a tool name: MCP tools are named
// "<server>__<tool>" (DESIGN.md §6, seed §1 "Tool source").
const SourceSeparator = "__"

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Registry holds every selectable tool by name, from every tool source: built-ins
// added once with Add, and MCP servers whose tool lists may change at runtime
// (SetSource replaces one server's tools). It is safe for concurrent use: runs call
// Select while sources are being replaced; a run keeps the Tool values it selected.
//
// Sources declared with Expect also have a readiness state (see ready.go), so a
// run can wait for the tools it may call before it starts.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	sources map[string][]string // source -> tool names it registered
	// states is the readiness of each declared source; changed is closed and
	// replaced on every change of states (a broadcast to WaitReady callers).
	states  map[string]*sourceState
	changed chan struct{}
	waiting int // WaitReady calls blocked now
	// waitingChanged is closed and replaced whenever waiting changes
	// (WaitWaiting's wake-up).
	waitingChanged chan struct{}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]Tool{}, sources: map[string][]string{},
		states: map[string]*sourceState{}, changed: make(chan struct{}), waitingChanged: make(chan struct{})}
}

// Add registers t under t.Name(). It fails with ErrInvalidToolName for a name the
// API refuses and ErrDuplicateTool when the name is taken.
func (r *Registry) Add(t Tool) error {
	name := t.Name()
	if !toolNameRE.MatchString(name) {
		return fmt.Errorf("%w: %q", ErrInvalidToolName, name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateTool, name)
	}
	r.tools[name] = t
	return nil
}

// Remove unregisters the tool with this name and reports whether it existed.
func (r *Registry) Remove(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; !ok {
		return false
	}
	delete(r.tools, name)
	for src, names := range r.sources {
		if i := slices.Index(names, name); i >= 0 {
			r.sources[src] = slices.Delete(names, i, i+1)
		}
	}
	return true
}

// SetSource atomically replaces every tool previously registered by source with
// tools (nil or empty removes them all). Each tool must be named
// "<source>__<tool>" (ErrInvalidToolName) and must not collide with a tool of
// another source or a built-in (ErrDuplicateTool); on error nothing changes.
//
// For a source declared with Expect, a non-nil list (even empty) marks it ready
// and nil (tools withdrawn) marks it starting again, so runs wait for it.
func (r *Registry) SetSource(source string, tools []Tool) error {
	if !toolNameRE.MatchString(source) || strings.Contains(source, SourceSeparator) {
		return fmt.Errorf("%w: source %q", ErrInvalidToolName, source)
	}
	prefix := source + SourceSeparator
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.sources[source]
	seen := map[string]bool{}
	for _, t := range tools {
		name := t.Name()
		if !strings.HasPrefix(name, prefix) || len(name) == len(prefix) || !toolNameRE.MatchString(name) {
			return fmt.Errorf("%w: %q (want %s<tool>)", ErrInvalidToolName, name, prefix)
		}
		if _, taken := r.tools[name]; (taken && !slices.Contains(old, name)) || seen[name] {
			return fmt.Errorf("%w: %q", ErrDuplicateTool, name)
		}
		seen[name] = true
	}
	for _, name := range old {
		delete(r.tools, name)
	}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		r.tools[t.Name()] = t
		names = append(names, t.Name())
	}
	if len(names) == 0 {
		delete(r.sources, source)
	} else {
		r.sources[source] = names
	}
	if _, declared := r.states[source]; declared {
		if tools == nil {
			r.setStateLocked(source, sourceStarting, nil)
		} else {
			r.setStateLocked(source, sourceReady, nil)
		}
	}
	return nil
}

// Get returns the tool with this exact name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Names returns every registered tool name, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.tools))
	for n := range r.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Select resolves a bot's tool list (BotProfile.Tools). Each name is an exact tool
// name, a source name "<server>" selecting all "<server>__*" tools, or the pattern
// "<server>__*". The result keeps the order of names (a source's tools sorted by
// name) without duplicates. Names that match nothing are reported in one error
// wrapping ErrUnknownTool that lists them; the tools that did match are returned
// alongside it, so a caller may go on without a source that is momentarily down.
func (r *Registry) Select(names []string) ([]Tool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var (
		out     []Tool
		unknown []string
		seen    = map[string]bool{}
	)
	add := func(t Tool) {
		if !seen[t.Name()] {
			seen[t.Name()] = true
			out = append(out, t)
		}
	}
	for _, name := range names {
		if t, ok := r.tools[name]; ok {
			add(t)
			continue
		}
		prefix := strings.TrimSuffix(name, "*")
		if prefix == name {
			prefix = name + SourceSeparator
		} else if !strings.HasSuffix(prefix, SourceSeparator) {
			unknown = append(unknown, name)
			continue
		}
		var matched []string
		for n := range r.tools {
			if strings.HasPrefix(n, prefix) {
				matched = append(matched, n)
			}
		}
		if len(matched) == 0 {
			unknown = append(unknown, name)
			continue
		}
		sort.Strings(matched)
		for _, n := range matched {
			add(r.tools[n])
		}
	}
	if len(unknown) > 0 {
		return out, fmt.Errorf("%w: %s", ErrUnknownTool, strings.Join(unknown, ", "))
	}
	return out, nil
}
