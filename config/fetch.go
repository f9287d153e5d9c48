package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
)

// Fetch is a bot's egress policy for http_fetch (per bot `fetch`). A GET or
// HEAD to a domain in AllowDomains (or one of its subdomains) runs without a
// person's approval; a call that sends a body (POST, PUT, PATCH, DELETE)
// always asks. A call to any other host follows Unlisted:
//   - "read" (default): a GET or HEAD runs, unless its URL has a query string
//     (it could carry data out), which asks first;
//   - "ask": every call asks first;
//   - "refuse": every call is refused.
//
// fetch_allow_hosts (which private or loopback hosts may be reached at all)
// applies on top.
type Fetch struct {
	AllowDomains []string `yaml:"allow_domains"`
	Unlisted     string   `yaml:"unlisted"`
}

// domainRe is a DNS name: labels of letters, digits and "-", dot-separated.
var domainRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
})

// validate adds a problem for each bad key under path: unlisted is read, ask
// or refuse; each allow_domains entry is a domain name or an IP address (no
// scheme, port, path or wildcard: a domain covers its subdomains).
func (f Fetch) validate(p *problems, path string) {
	if f.Unlisted != "" {
		checkEnum(p, path+".unlisted", f.Unlisted, "read", "ask", "refuse")
	}
	for i, d := range f.AllowDomains {
		at := fmt.Sprintf("%s.allow_domains[%d]", path, i)
		switch low := strings.ToLower(strings.TrimSuffix(d, ".")); {
		case strings.HasPrefix(low, "*."):
			p.add(at, "%q: write %q; a domain covers its subdomains", d, low[2:])
		case domainRe().MatchString(low):
		default:
			if _, err := netip.ParseAddr(low); err != nil {
				p.add(at, "%q is not a domain name like example.com (no scheme, port or path)", d)
			}
		}
	}
}
