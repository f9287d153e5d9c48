package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"openbot"
	"strings"

	"openbot/config"
)

// loadConfig loads the file, checks the bots' tool names against the tool registry, and prints
// every problem to stderr, one per line with its field path, returning nil when
// there was any.
// builtinConfig is the config path that names the example configuration built
// into the binary (openbot.ExampleConfig): `openbot chat` runs it when no
// --config is given and there is no config.yaml.
const builtinConfig = "(the built-in example config)"

func loadConfig(path string, stderr io.Writer, lookupEnv config.LookupEnv) *config.Config {
	return loadConfigChecked(path, stderr, lookupEnv, false)
}

// loadConfigChecked is loadConfig; with warnKey a bot profile that cannot work
// yet (the public OpenAI API without a key) is printed as a warning first, which
// is not a problem: the key usually comes from the environment at run time.
func loadConfigChecked(path string, stderr io.Writer, lookupEnv config.LookupEnv, warnKey bool) *config.Config {
	var (
		cfg *config.Config
		err error
	)
	if path == builtinConfig {
		cfg, err = config.Parse(openbot.ExampleConfig, lookupEnv)
	} else {
		cfg, err = config.Load(path, lookupEnv)
	}
	var es config.Errors
	if cfg != nil && (err == nil || errors.As(err, &es)) {
		if warnKey {
			if prof, msg := missingKeyProfile(cfg); msg != "" {
				fmt.Fprintf(stderr, "%s: warning: %s\n", path, config.FieldError{Path: "llm." + prof + ".api_key", Msg: msg}.Error())
			}
		}
		if cfg.Cost.Unpriced == config.UnpricedWarn {
			// With cost.unpriced: refuse (the default) they are problems.
			for _, e := range cfg.UnpricedBudgets() {
				fmt.Fprintf(stderr, "%s: warning: %s\n", path, e.Error())
			}
		}
		// Tool names are checked against the registry in the same report.
		reg, rerr := newRegistry(cfg, slog.New(slog.DiscardHandler))
		if rerr != nil {
			// Only a bad fetch_allow_hosts entry fails here; check the tool names
			// against a registry without it, so they are reported too.
			es = append(es, config.FieldError{Path: "fetch_allow_hosts", Msg: strings.TrimPrefix(rerr.Error(), "built-in tools: tools: ")})
			plain := *cfg
			plain.FetchAllowHosts = nil
			reg, rerr = newRegistry(&plain, slog.New(slog.DiscardHandler))
		}
		if rerr == nil {
			es = append(es, checkTools(cfg, reg)...)
		}
		if len(es) > 0 {
			err = es
		}
	}
	if err == nil {
		return cfg
	}
	if errors.As(err, &es) {
		fmt.Fprintf(stderr, "%s: %d problem(s):\n", path, len(es))
		for _, e := range es {
			fmt.Fprintf(stderr, "  %s\n", e.Error())
		}
		return nil
	}
	fmt.Fprintf(stderr, "%s: %v\n", path, err)
	return nil
}

// runCheck is `openbot config check --config FILE`: it prints every problem and
// returns 1, or prints "config ok" and returns 0. A profile without the key it
// needs (public OpenAI without OPENAI_API_KEY) is a warning on stderr, not a
// problem: the file is valid, and serve and chat refuse to start until the key is
// set, with the same sentence.
func runCheck(args []string, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags("config check", stderr)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	cfg := loadConfigChecked(*path, stderr, lookupEnv, true)
	if cfg == nil {
		return exitFail
	}
	for _, m := range cfg.Unpriced() {
		fmt.Fprintf(stderr, "%s: warning: %s\n", *path, config.FieldError{Path: "cost.prices",
			Msg: fmt.Sprintf("model %q is unpriced: its calls cost 0 in the usage ledger", m)}.Error())
	}
	fmt.Fprintln(stdout, "config ok")
	return exitOK
}

// missingKey returns the one-sentence fix when a bot's LLM profile is the public
// OpenAI API without an api_key, else "".
func missingKey(cfg *config.Config) string {
	_, msg := missingKeyProfile(cfg)
	return msg
}

func missingKeyProfile(cfg *config.Config) (profile, msg string) {
	for _, b := range cfg.Bots {
		for _, name := range b.LLM {
			if p := cfg.LLM[name]; p.NeedsKey() {
				return name, fmt.Sprintf("llm profile %q has no api_key for %s: set OPENAI_API_KEY, or OPENAI_BASE_URL=http://localhost:11434/v1 for a local Ollama (which needs no key).", name, config.OpenAIBaseURL)
			}
		}
	}
	return "", ""
}
