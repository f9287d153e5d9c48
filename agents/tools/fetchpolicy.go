package tools

import (
	"net/http"
	"net/url"
	"strings"

	"openbot/core"
)

// fetchVerdict is what a bot's egress policy makes of one http_fetch call.
type fetchVerdict int

const (
	fetchRun    fetchVerdict = iota // runs without a person
	fetchAsk                        // asks a person first
	fetchRefuse                     // is refused, nothing sent
)

// decideFetch applies policy p to a call with method (upper case) to u: a GET
// or HEAD to a listed domain runs; a method that sends a body asks; a call to
// an unlisted host follows p.Unlisted, where the default lets a GET or HEAD run
// unless its URL carries a query string or user info, which could carry data
// out, and asks then.
func decideFetch(p core.FetchPolicy, method string, u *url.URL) fetchVerdict {
	reads := readMethods[method]
	if domainListed(p.AllowDomains, u.Hostname()) {
		if reads {
			return fetchRun
		}
		return fetchAsk
	}
	switch p.Unlisted {
	case core.FetchUnlistedRefuse:
		return fetchRefuse
	case core.FetchUnlistedAsk:
		return fetchAsk
	}
	if !reads || u.RawQuery != "" || u.ForceQuery || u.User != nil {
		return fetchAsk
	}
	return fetchRun
}

// domainListed reports whether host is one of domains or a subdomain of one
// (case-insensitive; a trailing dot is ignored).
func domainListed(domains []string, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range domains {
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		if d != "" && (host == d || strings.HasSuffix(host, "."+d)) {
			return true
		}
	}
	return false
}

// restrictsRedirects reports whether p keeps redirects to unlisted hosts from
// being followed: with Unlisted ask or refuse the allow list is the boundary,
// and an open redirect on a listed site must not lead past it.
func restrictsRedirects(p core.FetchPolicy) bool {
	return p.Unlisted == core.FetchUnlistedAsk || p.Unlisted == core.FetchUnlistedRefuse
}

// redirectAllowed reports whether http_fetch follows a redirect to req under
// p: always to the host the previous request went to, else only where the call
// would run without a person.
func redirectAllowed(p core.FetchPolicy, req *http.Request, via []*http.Request) bool {
	if !restrictsRedirects(p) || len(via) == 0 || strings.EqualFold(req.URL.Hostname(), via[len(via)-1].URL.Hostname()) {
		return true
	}
	return decideFetch(p, req.Method, req.URL) == fetchRun
}
