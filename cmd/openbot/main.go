// Command openbot runs a team of LLM bots in Slack, Telegram, Feishu and the
// terminal (DESIGN.md §2 "cmd/openbot"). It is wiring only: it reads the
// configuration, maps it onto each package's Options, starts everything under one
// supervisor and shuts it down in order.
//
//	openbot init                         ask, check and write config.yaml and .env (or add a channel)
//	openbot serve --config FILE          run every configured channel until SIGINT/SIGTERM
//	openbot chat --config FILE           the same, plus the terminal channel on this terminal
//	openbot config check --config FILE   validate and print every problem
//	openbot config example               print the example configuration built into the binary
//	openbot reload --config FILE         check FILE, then have the running serve or chat apply it (SIGHUP)
//	openbot doctor --config FILE         check every account, model, MCP server, the store
//	openbot store compact --config FILE  rewrite the store file offline to give freed space back
//	openbot store migrate --from bolt:PATH --to postgres:DSN  copy a bbolt store into PostgreSQL
//	openbot schedules --config FILE      the scheduled messages, their next and last slots
//	openbot triggers --config FILE       the inbound webhooks and their last deliveries
//	openbot approvals list [--pending]   every question and decision (who, when, what)
//	openbot threads | thread ID | runs [--thread N] | run ID | activity [--follow]
//	                                     the console's reads for a terminal
//	openbot version
//	openbot help COMMAND                 a command's flags (also COMMAND --help)
//
// In chat mode the log goes to openbot.log next to the store file, so it does not
// interleave with the conversation; serve logs to stderr. Piped chat (input not a
// terminal) exits 1 when a run of the session failed, naming each on stderr.
package main

import (
	"context"
	"fmt"
	"io"
	"openbot"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"

	"openbot/config"
)

// Version is openbot's release version, set at build time by `make`
// (-ldflags -X main.Version=...); `openbot version` appends the VCS revision
// when the build recorded it, and the Go version.
var Version = "0.1.0-dev"

// Exit codes of run.
const (
	exitOK    = 0
	exitFail  = 1 // configuration problems, startup or runtime failure
	exitUsage = 2 // unknown command or bad flags
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

const usage = `usage:
  openbot init [--config FILE]                      set up channels and a model, write config.yaml and .env
  openbot serve --config FILE [--log-level LEVEL]   run every configured channel
  openbot chat --config FILE [--log-level LEVEL]    serve plus the terminal channel
  openbot config check --config FILE                validate the configuration
  openbot config example                            print the example configuration (chat runs it when there is no config.yaml)
  openbot reload --config FILE                      apply a changed configuration without a restart
  openbot doctor --config FILE [--timeout D]        check accounts, models, MCP, store
  openbot store compact --config FILE               shrink the store file (openbot stopped)
  openbot store migrate --from bolt:PATH --to postgres:DSN  copy the store into PostgreSQL (openbot stopped)
  openbot schedules --config FILE                   list the scheduled messages
  openbot triggers --config FILE                    list the inbound webhooks and their last deliveries
  openbot approvals list [--pending] --config FILE  the audit of questions and decisions
  openbot threads [--platform P] [--bot B] [--pending] [--q TEXT]   threads, newest first
  openbot thread ID [--limit N]                     a thread's messages, bots' summaries marked
  openbot runs [--thread N] [--bot B] [--status S]  runs, newest first
  openbot run ID                                    a run's timeline: model calls, tools, questions
  openbot activity [--follow] [--kind K] [--level L] [--bot B] [--thread N]  the activity log
  openbot cancel RUN | stop THREAD --bot B | pause BOT | resume BOT   steer the running server
  openbot usage [--by bot|thread|day] [--since WHEN]   tokens and cost from the usage ledger
  openbot memory list|show|rm|edit [ID] --bot B     see and fix a bot's memories
  openbot people [revoke ID] | pair CODE | owner add ID [--name N]   who may talk to the bots
  openbot policy [ACCOUNT CHANNEL [key=value ...]]  list or set channel policies (CHANNEL * is the account's default)
  openbot policy remove ACCOUNT CHANNEL             remove a stored channel policy (the configured one applies again)
  openbot version
  openbot help COMMAND                              a command's flags (also: COMMAND --help)
`

// benchMoved answers `openbot bench`, which older notes name: the benchmarks
// are not part of the binary (cmd/openbot/bench_main_test.go).
const benchMoved = `openbot bench: the benchmarks are not part of the openbot binary; run them from the source tree:
  go test ./cmd/openbot -run '^$' -bench '^BenchmarkIngest$' -benchtime 1x
  go test ./cmd/openbot -run '^$' -bench '^BenchmarkPlatform$/slack' -benchtime 1x -args -rate 100 -duration 10s
(every benchmark and flag: docs/ARCHITECTURE.md, "Benchmarks")
`

// run is the whole program behind main, testable in-process: args without the
// program name, the standard streams, and the environment lookup. ctx ends on
// SIGINT/SIGTERM. It returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	errOut := stderr // refusals stay on stderr
	if asksHelp(args[1:]) {
		stderr = stdout // the flag list asked for is the answer: on stdout, as usage is
	}
	switch args[0] {
	case "init":
		return runInit(ctx, args[1:], stdin, stdout, stderr, lookupEnv)
	case "serve":
		return runServe(ctx, "serve", args[1:], stdin, stdout, stderr, lookupEnv)
	case "chat":
		return runServe(ctx, "chat", args[1:], stdin, stdout, stderr, lookupEnv)
	case "config":
		if len(args) >= 2 && isHelp(args[1]) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		if len(args) == 2 && args[1] == "example" {
			_, _ = stdout.Write(openbot.ExampleConfig)
			return exitOK
		}
		if len(args) < 2 || args[1] != "check" {
			if len(args) >= 2 {
				fmt.Fprintf(stderr, "openbot config: unknown subcommand %q (want check or example)\n", args[1])
			}
			fmt.Fprint(stderr, usage)
			return exitUsage
		}
		return runCheck(args[2:], stdout, stderr, lookupEnv)
	case "reload":
		return runReload(ctx, args[1:], stdout, stderr, lookupEnv)
	case "doctor":
		return runDoctor(ctx, args[1:], stdout, stderr, lookupEnv)
	case "store":
		return runStore(ctx, args[1:], stdout, stderr, lookupEnv)
	case "schedules":
		return runSchedules(ctx, args[1:], stdout, stderr, lookupEnv)
	case "triggers":
		return runTriggers(ctx, args[1:], stdout, stderr, lookupEnv)
	case "approvals":
		return runApprovals(ctx, args[1:], stdout, stderr, lookupEnv)
	case "threads", "thread", "runs", "run", "activity":
		return runInspect(ctx, args[0], args[1:], stdout, stderr, lookupEnv)
	case "cancel", "stop", "pause", "resume":
		return runSteer(ctx, args[0], args[1:], stdout, stderr, lookupEnv)
	case "usage":
		return runUsage(ctx, args[1:], stdout, stderr, lookupEnv)
	case "memory":
		return runMemory(ctx, args[1:], stdin, stdout, stderr, lookupEnv)
	case "people", "pair", "owner", "policy":
		return runPeople(ctx, args[0], args[1:], stdout, stderr, lookupEnv)
	case "bench":
		fmt.Fprint(errOut, benchMoved)
		return exitUsage
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return exitOK
	case "help", "--help", "-help", "-h":
		if len(args) > 1 && args[0] == "help" {
			return runHelp(ctx, args[1:], stdin, stdout, stderr, lookupEnv)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(errOut, "openbot: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}

// subcommands are the subcommands of the commands that have them, for help.
var subcommands = map[string][]string{
	"config":    {"check", "example"},
	"store":     {"compact", "migrate"},
	"approvals": {"list"},
	"memory":    {"list", "show", "rm", "edit"},
}

// runHelp is `openbot help COMMAND [SUBCOMMAND]`: run's answer to the command
// (and its subcommand) with --help alone, since whatever else was typed could
// take --help as a flag's value and run the command. An unknown command is
// refused by run.
func runHelp(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	call := []string{args[0], "--help"}
	if len(args) > 1 && slices.Contains(subcommands[args[0]], args[1]) {
		call = []string{args[0], args[1], "--help"}
	}
	return run(ctx, call, stdin, stdout, stderr, lookupEnv)
}

func versionString() string {
	v := "openbot " + Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v + " " + runtime.Version()
}
