package telegram

import (
	"strings"
	"sync"
)

// Peers is the directory of one openbot's Telegram bot accounts: each account's
// adapter records its bot's @username (learned with getMe) and the handle it
// speaks as, so that every adapter knows a mention of another of the team's bot
// accounts names a bot, not a person (DESIGN.md §3 "Mentions"; §5: a message that
// mentions another bot or person is not the answer to a free-text question).
// Create one with NewPeers and pass it to every account (Options.Peers); it is
// safe for concurrent use and holds one entry per account.
type Peers struct {
	mu     sync.RWMutex
	byName map[string]string // lowercased username without "@" -> handle or "*"
}

// NewPeers returns an empty directory.
func NewPeers() *Peers { return &Peers{byName: map[string]string{}} }

// add records that the bot account username speaks as bot (a handle or "*").
func (p *Peers) add(username, bot string) {
	if p == nil || username == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byName[strings.ToLower(username)] = bot
}

// bot returns what the account with this username ("@name" or "name",
// case-insensitive) speaks as, and whether it is one of the team's accounts.
func (p *Peers) bot(username string) (string, bool) {
	if p == nil {
		return "", false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	b, ok := p.byName[strings.ToLower(strings.TrimPrefix(username, "@"))]
	return b, ok
}
