package core

import (
	"regexp"
	"strings"
)

// Redaction of credentials and addresses in text that leaves the process: log
// lines, stored errors (runs, outbox entries, run events) and thread notices
// (DESIGN.md §9: secrets never appear in logs, notices or stored errors, URL
// credentials included). The functions are pure and safe for concurrent use.

// Redacted replaces a credential in text redacted by Redact.
const Redacted = "[redacted]"

var (
	// urlUserinfo is the user[:password]@ part of a URL.
	urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s"'<>]+@`)
	// secretParam is a name=value pair whose name says it holds a secret: a URL
	// query parameter (api-key, access_token, sig...) or the same in free text.
	secretParam = regexp.MustCompile(`(?i)(^|[?&;,\s"'(])((?:[a-z0-9_.-]*[-_.])?(?:api[-_]?key|apikey|key|token|secret|password|passwd|pwd|signature|sig|auth|credentials?))=([^&#\s"'<>),;]*)`)
	// botToken is a Telegram bot token in a Bot API path (/bot<id>:<secret>/).
	botToken = regexp.MustCompile(`bot[0-9]+:[A-Za-z0-9_-]{20,}`)
	// address is an IPv4 or bracketed IPv6 literal or localhost, with an optional port.
	address = regexp.MustCompile(`(?i)\b(?:\d{1,3}(?:\.\d{1,3}){3}|localhost)(?::\d{1,5})?\b|\[[0-9a-f:.]+\](?::\d{1,5})?`)
)

// Redact returns s with credentials removed: the userinfo of every URL
// ("http://user:pass@host" becomes "http://[redacted]@host"), the value of every
// secret-like parameter (api-key, key, token, access_token, secret, password,
// sig, signature, auth and names ending in them) in URLs and free text, and
// Telegram bot tokens in Bot API paths. Hosts, ports and paths stay, so a log
// line keeps the address it needs for diagnosis. Text without credentials is
// returned unchanged.
func Redact(s string) string {
	// Every pattern needs one of these; most log text has none, so skip the
	// regular expressions (every log line passes here).
	if !strings.ContainsAny(s, "@=") && !strings.Contains(s, "bot") {
		return s
	}
	s = urlUserinfo.ReplaceAllString(s, "${1}"+Redacted+"@")
	s = secretParam.ReplaceAllString(s, "${1}${2}="+Redacted)
	return botToken.ReplaceAllString(s, "bot"+Redacted)
}

// ForPeople returns s redacted (Redact) and with network addresses (IP literals
// and localhost, with their ports) replaced by "[address]": the form of an error
// text that may be shown to people in a chat thread, who need the cause in words
// and not the operator's internal topology.
func ForPeople(s string) string {
	return address.ReplaceAllString(Redact(s), "[address]")
}

// PeopleError is implemented by errors that name their cause in words for the
// people in a thread. When a run fails, the notice in the thread uses Notice() (passed
// through ForPeople), while Error() keeps the detail for the log and the stored
// run error (both passed through Redact). Notice returns one short sentence
// without credentials or internal addresses.
type PeopleError interface {
	error
	Notice() string
}
