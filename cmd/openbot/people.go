package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"openbot/admin"
	"openbot/config"
	"openbot/core"
)

// People from a terminal: `openbot people` lists the stored people and the
// pairing codes waiting, `openbot pair CODE` lets in the person a code was
// given to, `openbot people revoke ID` removes one, `openbot policy remove
// ACCOUNT CHANNEL` removes a stored channel policy, and `openbot owner add ID`
// makes an owner (the way to name the first one without editing the config).
// Like the inspect commands they work in process over the store file when no
// server holds it, else through the running server's API with admin.token, as
// admin.identity.

const peopleUsage = "usage: openbot people [revoke ID] | openbot pair CODE | openbot owner add ID [--name NAME] | openbot policy [ACCOUNT CHANNEL [key=value ...]] | openbot policy remove ACCOUNT CHANNEL  [--config FILE]"

// runPeople is `openbot people|pair|owner`.
func runPeople(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, cfgPath := configFlags(cmd, stderr)
	name := fs.String("name", "", "the owner's name (owner add)")
	if err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	a := fs.Args()
	var method, path string
	var body any
	switch {
	case cmd == "people" && len(a) == 0:
		method, path = http.MethodGet, "/api/v1/people"
	case cmd == "people" && len(a) == 2 && a[0] == "revoke":
		method, path = http.MethodDelete, "/api/v1/people/"+url.PathEscape(a[1])
	case cmd == "pair" && len(a) == 1:
		method, path, body = http.MethodPost, "/api/v1/people/pair", map[string]string{"code": a[0]}
	case cmd == "owner" && len(a) == 2 && a[0] == "add":
		method, path, body = http.MethodPost, "/api/v1/people/owners", map[string]string{"id": a[1], "name": *name}
	case cmd == "policy" && len(a) == 0:
		method, path = http.MethodGet, "/api/v1/policies"
	case cmd == "policy" && len(a) == 3 && a[0] == "remove":
		method, path = http.MethodDelete, "/api/v1/policies?"+url.Values{"account": {a[1]}, "channel": {a[2]}}.Encode()
	case cmd == "policy" && len(a) >= 2:
		p, err := core.ParsePolicy(strings.Join(a[2:], " "))
		if err != nil {
			fmt.Fprintf(stderr, "openbot policy: nothing changed: %v\n", err)
			return exitUsage
		}
		method, path, body = http.MethodPut, "/api/v1/policies?"+url.Values{"account": {a[0]}, "channel": {a[1]}}.Encode(), p
	default:
		fmt.Fprintln(stderr, peopleUsage)
		return exitUsage
	}
	if cmd == "owner" {
		// At first start there is no store yet: make it, so the owner is there
		// when openbot starts.
		cfg := loadConfig(*cfgPath, stderr, lookupEnv)
		if cfg == nil {
			return exitFail
		}
		if cfg.Store.Driver == config.StoreBolt {
			if _, err := os.Stat(cfg.Store.Path); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(filepath.Dir(cfg.Store.Path), 0o700); err != nil {
					fmt.Fprintf(stderr, "openbot owner: %v\n", err)
					return exitFail
				}
				st, err := openStore(ctx, cfg, nil, time.Second)
				if err != nil {
					fmt.Fprintf(stderr, "openbot owner: %v\n", err)
					return exitFail
				}
				st.Close()
			}
		}
	}
	r, _, code := readerFor(ctx, *cfgPath, cmd, stdout, stderr, lookupEnv)
	if r == nil {
		return code
	}
	defer r.close()
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	if cmd == "policy" {
		var pols map[string]core.ChannelPolicy
		var one core.ChannelPolicy
		var err error
		switch method {
		case http.MethodGet:
			err = r.get(ctx, path, &pols)
		case http.MethodDelete:
			if err = r.do(ctx, method, path, nil, &one); err == nil {
				fmt.Fprintf(stdout, "removed the stored policy of %s %s (it was: %s); the configured one applies there again\n", a[1], a[2], one.Summary())
				return exitOK
			}
		default:
			err = r.do(ctx, method, path, payload, &one)
			pols = map[string]core.ChannelPolicy{a[0] + " " + a[1]: one}
		}
		if err != nil {
			fmt.Fprintf(stderr, "openbot policy: nothing changed: %v\n", err)
			return exitFail
		}
		keys := slices.Sorted(maps.Keys(pols))
		if len(keys) == 0 {
			fmt.Fprintln(stdout, "no stored channel policies (the configured ones are in the config file)")
		}
		for _, k := range keys {
			fmt.Fprintf(stdout, "%s: %s\n", k, pols[k].Summary())
		}
		return exitOK
	}
	if method == http.MethodGet {
		var v admin.PeopleView
		if err := r.get(ctx, path, &v); err != nil {
			fmt.Fprintf(stderr, "openbot %s: %v\n", cmd, err)
			return exitFail
		}
		fmt.Fprintln(stdout, core.PeopleText(v.People, v.Pending))
		return exitOK
	}
	var p core.Person
	if err := r.do(ctx, method, path, payload, &p); err != nil {
		fmt.Fprintf(stderr, "openbot %s: nothing changed: %v\n", cmd, err)
		return exitFail
	}
	verb := map[string]string{"people": "removed", "pair": "let in", "owner": "is now an owner:"}[cmd]
	fmt.Fprintf(stdout, "%s %s %s (%s)\n", p.ID, verb, p.Name, joinIDs(p.Identities))
	return exitOK
}

func joinIDs(ids []core.ActorID) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += string(id)
	}
	return s
}

// localPeople is the people keeper of a CLI working in process over the store
// file: an engine that never runs (no agent is ever called), whose owners are
// the configuration's and admin.identity, as whoever holds the store file can
// change everything in it anyway.
func localPeople(cfg *config.Config, st core.Store) (admin.PeopleKeeper, core.ActorID, error) {
	op := core.ActorID(cfg.Admin.Identity)
	owners := append(actorIDs(cfg.OwnerIDs()), op)
	eng, err := core.New(core.Options{Store: st, Agent: idleAgent{}, Bots: botProfiles(cfg), DefaultBot: cfg.DefaultBot, Owners: owners})
	if err != nil {
		return nil, "", err
	}
	return eng, op, nil
}

// idleAgent is the agent of an engine that never runs.
type idleAgent struct{}

func (idleAgent) Execute(context.Context, *core.Job) (core.Result, error) {
	return core.Result{}, errors.New("this engine does not run")
}
