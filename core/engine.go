package core

import (
	"log/slog"
	"time"
)

// Limits bound the runtime (seed §4.3, §5, §6). Zero values take the defaults.
type Limits struct {
	MaxConcurrentRuns   int           // global cap on running runs; default 4
	MaxBotHops          int           // bot-to-bot hops before the brake; default 20
	MaxModelCallsPerRun int           // default 40; a bot's MaxModelCalls overrides it
	HistoryTokenBudget  int           // estimated at chars/4; default 24000
	HistoryMaxMessages  int           // default 80
	RunTimeout          time.Duration // wall time of one run; default 10m
}

// Clock is the time source, so scheduler, retry and expiry tests need not sleep.
type Clock interface {
	Now() time.Time
}

// Options configures an Engine. Store, Agent and at least one bot are required.
type Options struct {
	Store Store
	Agent Agent
	Bots  []BotProfile
	// DefaultBot is the handle that answers unmentioned human messages (seed §4.1);
	// defaults to "chief_of_staff" when configured, else the first bot.
	DefaultBot string
	Limits     Limits
	Logger     *slog.Logger
	Clock      Clock // defaults to the system clock
}
