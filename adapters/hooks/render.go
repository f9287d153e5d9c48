package hooks

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// placeholderRe finds "{a.b.c}" in a template: a dotted path of payload
// fields; "{event}" and "{trigger}" name the event and the trigger.
var placeholderRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{([A-Za-z0-9_.\-]+)\}`) })

// CheckTemplate reports a template whose braces do not all form placeholders.
func CheckTemplate(s string) error {
	rest := placeholderRe().ReplaceAllString(s, "")
	if strings.ContainsAny(rest, "{}") {
		return fmt.Errorf("%q has a brace that is not a {field.path} placeholder", s)
	}
	return nil
}

// field returns the value at a dotted path of a decoded JSON payload (object
// keys; a number selects an array element) as text, and whether it was there.
// Strings are themselves, numbers as written, true/false, objects and arrays
// as compact JSON; null is absent.
func field(payload any, path string) (string, bool) {
	cur := payload
	for _, k := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = v[k]; !ok {
				return "", false
			}
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(v) {
				return "", false
			}
			cur = v[i]
		default:
			return "", false
		}
	}
	switch v := cur.(type) {
	case nil:
		return "", false
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	b, _ := json.Marshal(cur)
	return string(b), true
}

// render fills a template's placeholders from vars first, then the payload.
// An "@" in a payload value becomes a full-width "＠", so the payload
// mentions no bot. It reports the placeholders that had no value (rendered as "").
func render(tmpl string, payload any, vars map[string]string) (string, []string) {
	var missing []string
	out := placeholderRe().ReplaceAllStringFunc(tmpl, func(ph string) string {
		path := ph[1 : len(ph)-1]
		if v, ok := vars[path]; ok {
			return v
		}
		v, ok := field(payload, path)
		if !ok {
			missing = append(missing, path)
		}
		// Payload text is the sender's: an @handle in it must not address a bot.
		return strings.ReplaceAll(v, "@", "＠")
	})
	return out, missing
}
