package core

// The http_fetch egress policy modes: what a call to a host that
// FetchPolicy.AllowDomains does not list does.
const (
	// FetchUnlistedRead (the default, also "") lets a GET or HEAD without a
	// query string run; one with a query string, or any method that sends a
	// body, asks a person first, as a query string can carry data out.
	FetchUnlistedRead = "read"
	// FetchUnlistedAsk makes every call to an unlisted host ask a person first.
	FetchUnlistedAsk = "ask"
	// FetchUnlistedRefuse refuses every call to an unlisted host.
	FetchUnlistedRefuse = "refuse"
)

// FetchPolicy is a bot's egress policy for http_fetch (its `fetch` config). A
// GET or HEAD to a listed domain runs without approval, with or without a
// query string; a call that sends a body (POST, PUT, PATCH, DELETE) always asks
// a person first. Calls to other hosts follow Unlisted. The zero value is the
// default: no domains listed, FetchUnlistedRead. The address guard
// (fetch_allow_hosts, private addresses refused) applies on top, whatever the
// policy says.
type FetchPolicy struct {
	// AllowDomains are lower-case domain names; each covers its subdomains
	// ("github.com" covers "api.github.com"). An IP address matches only itself.
	AllowDomains []string `json:"allow_domains,omitempty"`
	// Unlisted is FetchUnlistedRead (or ""), FetchUnlistedAsk or
	// FetchUnlistedRefuse.
	Unlisted string `json:"unlisted,omitempty"`
}

// FetchPolicyFor returns the policy of a call in a conversation: the bot's,
// with what the conversation's own policy sets in its place (its AllowDomains
// when not nil, its Unlisted when not empty). A nil channel is the bot's alone.
// http_fetch reads the policy from the BotProfile of the run
// (agents.ToolCall.Bot and CallApprover's bot), so a conversation's policy
// takes effect by setting that profile's Fetch to this.
func FetchPolicyFor(bot FetchPolicy, channel *FetchPolicy) FetchPolicy {
	if channel == nil {
		return bot
	}
	if channel.AllowDomains != nil {
		bot.AllowDomains = channel.AllowDomains
	}
	if channel.Unlisted != "" {
		bot.Unlisted = channel.Unlisted
	}
	return bot
}
