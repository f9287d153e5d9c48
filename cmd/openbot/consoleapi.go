package main

import (
	"context"

	"openbot/admin"
	"openbot/core"
)

// consoleAPI builds the operator console's API (DESIGN.md §10) over the engine's
// store; serve mounts it under /api/v1/ behind the admin bearer token
// (web.Dashboard.Bearer). Answers go through the engine as admin.identity, and
// so does steering.
// rl, when set, serves the running configuration and the reload.
// hl and accts, when set, serve the channels' health.
// fixed, when set, is a bot's fixed prompt size in tokens (agents.Agent.FixedPromptTokens).
func (a *app) consoleAPI(eng *core.Engine, commits *admin.Notifier, rl *reloader, hl *health, accts *accountSet, fixed func(core.BotProfile) int) (*admin.Server, error) {
	var chans func(context.Context) (any, error)
	if hl != nil && accts != nil {
		chans = func(ctx context.Context) (any, error) { return channels(ctx, hl, accts, eng.Store()) }
	}
	var cfgView func() any
	var reload func(context.Context, core.By) (any, error)
	cost := func() core.Cost { return *coreCost(a.cfg) }
	if rl != nil {
		cfgView = rl.state
		cost = func() core.Cost { return *coreCost(rl.config()) }
		reload = func(ctx context.Context, by core.By) (any, error) { return rl.reload(ctx, by) }
	}
	chat := admin.NewChat(eng) // the dashboard's chat, a console account of its own
	if err := eng.AddAdapter(chat); err != nil {
		return nil, err
	}
	return admin.New(admin.Options{
		Store:           eng.Store(),
		Answerer:        eng,
		Controller:      eng,
		People:          eng,
		Bots:            eng.Bots(),
		Identity:        core.ActorID(a.cfg.Admin.Identity),
		IdentityName:    a.cfg.Admin.Name,
		StorePath:       a.cfg.Store.Path,
		Notifier:        commits,
		Logger:          a.log,
		Config:          cfgView,
		Reload:          reload,
		Channels:        chans,
		Cost:            cost,
		Chat:            chat,
		FixedPrompt:     fixed,
		FixedPromptWarn: a.cfg.Limits.FixedPromptWarnTokens,
	})
}
