package main

import (
	"fmt"
	"slices"
	"strings"

	"openbot/config"
	"openbot/core"
)

// people checks who may approve and who may talk to the bots: that an owner
// exists, that every bot with tools behind an approval has someone who could
// approve them, that groups open to everyone cannot ask for those tools, and
// who the dashboard's operator is. Config only, plus the owners stored at run
// time when the store could be read.
func (d *doctor) people() {
	cfg := d.cfg
	owners := len(cfg.OwnerIDs()) + d.storedOwners
	if owners == 0 {
		d.add(checkWarn, "owners", "no owner: nobody can let people in (/pair) or change channel policy, and only approvers can approve",
			"name owners: [<your id>] in the config, or run `openbot owner add <id>` (ids: slack:<team>:<user>, telegram:<user id>, feishu:<open_id>)")
	} else {
		d.add(checkOK, "owners", fmt.Sprintf("%d (config and store)", owners), "")
	}
	for _, b := range cfg.Bots {
		gated := gatedTools(b)
		if len(gated) == 0 {
			continue
		}
		approvers := len(cfg.Approvers) + len(b.Approvers)
		for _, e := range b.ApprovalTools {
			approvers += len(e.Approvers)
		}
		if owners == 0 && approvers == 0 && !cfg.SelfApprove && !b.SelfApprove {
			d.add(checkWarn, "approvers of @"+b.Handle, "nobody can approve its "+strings.Join(gated, ", ")+" calls: they will be refused",
				"name owners: or approvers: in the config (or set self_approve: true to let people approve their own requests)")
		}
	}
	for _, acct := range accountsOf(cfg) {
		def := cfg.CorePolicies()[core.PolicyKey(core.AccountID(acct.id), core.AccountDefault)]
		if def.Mode == core.ModeDisabled || (def.Members != "" && def.Members != core.MembersEveryone) {
			continue
		}
		var exposed []string
		for _, b := range cfg.Bots {
			if acct.bot != "*" && acct.bot != b.Handle {
				continue
			}
			for _, tool := range gatedTools(b) {
				if !slices.ContainsFunc(def.ToolsRemoved, func(p string) bool { return core.ToolMatches(p, tool) }) {
					exposed = append(exposed, "@"+b.Handle+" "+tool)
				}
			}
		}
		if len(exposed) > 0 {
			d.add(checkWarn, "groups of "+acct.id, "anyone in a group the account is in may ask for "+strings.Join(exposed, ", ")+" (an approval is still needed)",
				"add a policies: entry for "+acct.id+" channel \"*\" with members: paired (or listed), or tools_removed for those tools")
		}
	}
	switch {
	case cfg.Admin.Token != "" && cfg.Admin.Identity == "":
		d.add(checkWarn, "dashboard operator", "admin.token is set but no admin.identity: the dashboard cannot approve", "set admin.identity (default "+config.DefaultOperator+")")
	case cfg.Admin.Token != "":
		d.add(checkOK, "dashboard operator", cfg.Admin.Identity+" is an owner: the dashboard approves and pairs", "")
	}
}

// gatedTools are the tools of b that need an approval: the ones both in its
// tools and in its approval_tools.
func gatedTools(b config.Bot) []string {
	var out []string
	for _, t := range b.Tools {
		if slices.ContainsFunc(b.ApprovalTools, func(e config.ApprovalTool) bool { return core.ToolMatches(e.Tool, t) }) {
			out = append(out, t)
		}
	}
	return out
}

// groupAccount is one platform account with groups: its id and the bot it speaks as.
type groupAccount struct{ id, bot string }

func accountsOf(cfg *config.Config) []groupAccount {
	var out []groupAccount
	for _, a := range cfg.Slack {
		out = append(out, groupAccount{"slack/" + a.Name, a.Bot})
	}
	for _, a := range cfg.Telegram {
		out = append(out, groupAccount{"telegram/" + a.Name, a.Bot})
	}
	for _, a := range cfg.Feishu {
		out = append(out, groupAccount{"feishu/" + a.Name, a.Bot})
	}
	return out
}
