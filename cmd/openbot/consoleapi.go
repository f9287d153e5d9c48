package main

import (
	"openbot/admin"
	"openbot/core"
)

// consoleAPI builds the operator console's API (DESIGN.md §10) over the engine's
// store; serve mounts it under /api/v1/ behind the admin bearer token
// (web.Dashboard.Bearer). Answers go through the engine as admin.identity, and
// so does steering.
func (a *app) consoleAPI(eng *core.Engine, commits *admin.Notifier) (*admin.Server, error) {
	return admin.New(admin.Options{
		Store:        eng.Store(),
		Answerer:     eng,
		Controller:   eng,
		People:       eng,
		Bots:         eng.Bots(),
		Identity:     core.ActorID(a.cfg.Admin.Identity),
		IdentityName: a.cfg.Admin.Name,
		StorePath:    a.cfg.Store.Path,
		Notifier:     commits,
		Logger:       a.log,
	})
}
