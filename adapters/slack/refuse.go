package slack

// refuse logs a malformed or refused platform request at WARN (the house rule for
// bad input: logged and acknowledged, nothing else happens). The line carries the
// account (from the adapter's logger), the reason and the given attributes, which
// callers keep free of payloads and secrets: ids, paths, error values of parsing
// or verification, never a body, a token or the signing secret.
func (a *Adapter) refuse(reason string, attrs ...any) {
	a.log.Warn("slack request refused", append([]any{"reason", reason}, attrs...)...)
}
