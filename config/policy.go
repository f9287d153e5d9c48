package config

import (
	"fmt"

	"openbot/core"
)

// Policy is one channel policy (core.ChannelPolicy): where it applies and what
// it says. Empty fields keep the defaults (mention_only, everyone, the bots'
// own tools, approvers and instructions).
type Policy struct {
	// Account is "<platform>/<name>" of a configured account ("slack/acme").
	Account string `yaml:"account"`
	// Channel is the channel's id as openbot names it (Slack "<team>:<channel>",
	// a Telegram chat id or "<chat>:topic:<id>", a Feishu chat id), or "*" for
	// the account's default.
	Channel      string   `yaml:"channel"`
	Mode         string   `yaml:"mode"`
	Members      string   `yaml:"members"`
	Listed       []string `yaml:"listed"`
	DefaultBot   string   `yaml:"default_bot"`
	ToolsRemoved []string `yaml:"tools_removed"`
	ToolsAdded   []string `yaml:"tools_added"`
	Approvers    []string `yaml:"approvers"`
	Instructions string   `yaml:"instructions"`
	// Fetch, when set, replaces the bots' fetch keys in this channel.
	Fetch *Fetch `yaml:"fetch"`
	// Budget limits all runs in threads that started in this channel per UTC
	// day (tokens and/or cost in cost.currency units); under channel "*" each
	// channel of the account gets its own. Absent or zero: no limit.
	Budget Budget `yaml:"budget"`
}

// Core is the policy as core takes it.
func (p Policy) Core() core.ChannelPolicy {
	ids := func(in []string) []core.ActorID {
		var out []core.ActorID
		for _, s := range in {
			out = append(out, core.ActorID(s))
		}
		return out
	}
	out := core.ChannelPolicy{Mode: p.Mode, Members: p.Members, Listed: ids(p.Listed), DefaultBot: p.DefaultBot,
		ToolsRemoved: p.ToolsRemoved, ToolsAdded: p.ToolsAdded, Approvers: ids(p.Approvers), Instructions: p.Instructions,
		Budget: core.Limit{Tokens: p.Budget.Tokens, CostMicros: Micros(p.Budget.Cost)}}
	if p.Fetch != nil {
		out.Fetch = &core.FetchPolicy{AllowDomains: p.Fetch.AllowDomains, Unlisted: p.Fetch.Unlisted}
	}
	return out
}

// CorePolicies are the policies by core.PolicyKey.
func (c *Config) CorePolicies() map[string]core.ChannelPolicy {
	out := map[string]core.ChannelPolicy{}
	for _, p := range c.Policies {
		out[core.PolicyKey(core.AccountID(p.Account), p.Channel)] = p.Core()
	}
	return out
}

func (c *Config) validatePolicies(p *problems, handles map[string]bool) {
	accounts := map[string]bool{}
	for _, a := range c.Console {
		accounts["console/"+a.Name] = true
	}
	for _, a := range c.Slack {
		accounts["slack/"+a.Name] = true
	}
	for _, a := range c.Telegram {
		accounts["telegram/"+a.Name] = true
	}
	for _, a := range c.Feishu {
		accounts["feishu/"+a.Name] = true
	}
	seen := map[string]bool{}
	for i, pol := range c.Policies {
		path := fmt.Sprintf("policies[%d]", i)
		if !accounts[pol.Account] {
			p.add(path+".account", "%q is not a configured account (write <platform>/<name>, such as slack/acme)", pol.Account)
		}
		if pol.Channel == "" {
			p.add(path+".channel", "must be a channel id or \"*\" for the account's default")
		}
		if k := pol.Account + " " + pol.Channel; seen[k] {
			p.add(path, "%s channel %s has another policy above", pol.Account, pol.Channel)
		} else {
			seen[k] = true
		}
		if pol.Budget.Tokens < 0 {
			p.add(path+".budget.tokens", "must not be negative, got %d", pol.Budget.Tokens)
		}
		if pol.Budget.Cost < 0 {
			p.add(path+".budget.cost", "must not be negative, got %g", pol.Budget.Cost)
		}
		pol.Budget = Budget{} // reported above, with its field
		if err := pol.Core().Check(func(h string) bool { return handles[h] }); err != nil {
			p.add(path, "%v", err)
		}
		if pol.Fetch != nil {
			pol.Fetch.validate(p, path+".fetch")
		}
		checkApprovers(p, path+".listed", pol.Listed)
		checkApprovers(p, path+".approvers", pol.Approvers)
	}
}
